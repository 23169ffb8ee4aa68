// POSIX implementations of the durable writes and ranged reads.
#include "base/file_io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace llm {

FileDescriptor::FileDescriptor(const std::string& path, int flags, unsigned mode)
    : fd_(::open(path.c_str(), flags | O_CLOEXEC, static_cast<mode_t>(mode))) {
  LLM_CHECK(fd_ >= 0, "{}: cannot open: {}", path, std::strerror(errno));
}

FileDescriptor::~FileDescriptor() { ::close(fd_); }

void write_file_synced(const std::string& path, std::string_view bytes) {
  SyncedFileWriter file(path);
  file.append(bytes);
  file.finish();
}

SyncedFileWriter::SyncedFileWriter(const std::string& path)
    : path_(path), fd_(path, O_WRONLY | O_CREAT | O_TRUNC) {}

void SyncedFileWriter::append(std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    LLM_CHECK(n > 0, "{}: write failed after {} of {} bytes: {}", path_, size_ + done,
              size_ + bytes.size(), std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  size_ += bytes.size();
}

void SyncedFileWriter::finish() {
  LLM_CHECK(::fsync(fd_.get()) == 0, "{}: fsync failed: {}", path_, std::strerror(errno));
}

void fsync_directory(const std::string& dir) {
  FileDescriptor fd(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY);
  ::fsync(fd.get());  // some file systems refuse; the rename itself has happened
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  try {
    write_file_synced(tmp, bytes);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int error = errno;
    ::unlink(tmp.c_str());
    LLM_FAIL("{}: cannot rename from {}: {}", path, tmp, std::strerror(error));
  }
  fsync_directory(std::filesystem::path(path).parent_path().string());
}

std::string read_file(const std::string& path) {
  FileDescriptor fd(path, O_RDONLY);
  struct stat st {};
  LLM_CHECK(::fstat(fd.get(), &st) == 0, "{}: cannot stat: {}", path, std::strerror(errno));
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  read_file_range(path, 0, bytes.size(), bytes.data());
  return bytes;
}

void read_file_range(const std::string& path, size_t offset, size_t bytes, void* out) {
  FileDescriptor fd(path, O_RDONLY);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pread(fd.get(), static_cast<char*>(out) + done, bytes - done,
                        static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    LLM_CHECK(n >= 0, "{}: read failed at byte {}: {}", path, offset + done, std::strerror(errno));
    LLM_CHECK(n > 0, "{}: truncated: needed bytes [{}, {}) but the file ends at {}", path, offset,
              offset + bytes, offset + done);
    done += static_cast<size_t>(n);
  }
}

FileLock::FileLock(const std::string& path, const std::string& what)
    : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
  LLM_CHECK(fd_ >= 0, "{}: cannot open the lock file: {}", path, std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd_);
    LLM_CHECK(error == EWOULDBLOCK, "{}: cannot lock: {}", path, std::strerror(error));
    std::string holder = read_file(path);
    holder.erase(holder.find_last_not_of(" \n") + 1);
    LLM_FAIL("{}: another run holds the {} ({}); stop it first, or use another directory", path,
             what, holder.empty() ? "holder unknown" : holder);
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string holder = fmt::format("host {} pid {}\n", host, ::getpid());
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size())) {
    const int error = errno;
    ::close(fd_);
    LLM_FAIL("{}: cannot write the lock holder: {}", path, std::strerror(error));
  }
}

FileLock::~FileLock() { ::close(fd_); }  // closing releases the flock

}  // namespace llm
