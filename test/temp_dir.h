// A scratch directory for tests that write files (test_data.cpp, test_hf.cpp):
// <system temp dir>/<prefix><pid>_<n>, created empty and removed with its
// contents when the TempDir goes out of scope.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace llm::test_support {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            (prefix + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The path of `name` inside the directory (not created).
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace llm::test_support
