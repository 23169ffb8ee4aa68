// What every fuzz target shares: the input as a file in a scratch directory
// of this process (readers that take a path read it from there), and the one
// outcome a bad input may have besides success: an llm::Error. Any other
// exception escapes and libFuzzer reports it as a crash; so do ASan and
// UBSan findings and timeouts (make fuzz passes -timeout=1).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "base/error.h"

namespace llm::fuzz {

// A directory of this process's own, emptied for every input.
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    auto path = std::filesystem::temp_directory_path() / ("llm_fuzz_" + std::to_string(::getpid()));
    spdlog::set_level(spdlog::level::off);  // readers' warnings would flood the log
    return path;
  }();
  return dir;
}

inline void reset_scratch() {
  std::filesystem::remove_all(scratch());
  std::filesystem::create_directories(scratch());
}

// Writes `bytes` to scratch()/name and returns its path.
inline std::string write(const std::string& name, std::string_view bytes) {
  const std::filesystem::path path = scratch() / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `read`; an llm::Error is a clean refusal, anything else propagates.
template <class F>
void expect_clean(F&& read) {
  try {
    read();
  } catch (const Error&) {
  }
}

}  // namespace llm::fuzz
