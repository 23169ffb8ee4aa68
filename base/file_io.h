// Durable file writes, ranged reads and an exclusive lock file. A file written with
// write_file_atomically is either absent or complete at `path`, even across a crash: it is written
// to a temporary name, fsynced, renamed, and the directory entry is fsynced.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace llm {

// Writes `bytes` to `path` in place and fsyncs it (for files inside a
// temporary directory that is renamed as a whole later).
void write_file_synced(const std::string& path, std::string_view bytes);

// An open file descriptor, closed when it goes; opening fails with an
// llm::Error naming the path. `flags` as for open(2) (O_CLOEXEC is added).
class FileDescriptor {
 public:
  FileDescriptor(const std::string& path, int flags, unsigned mode = 0644);
  ~FileDescriptor();
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// write_file_synced in pieces: a file created (or truncated) at `path`,
// appended to, and fsynced by finish(); errors name the file. A writer
// destroyed without finish() leaves what it wrote, unsynced.
class SyncedFileWriter {
 public:
  explicit SyncedFileWriter(const std::string& path);

  void append(std::string_view bytes);
  size_t size() const { return size_; }  // bytes appended so far
  void finish();

 private:
  std::string path_;
  FileDescriptor fd_;
  size_t size_ = 0;
};

// Writes `bytes` to path + ".tmp", fsyncs, renames over `path`, fsyncs the directory.
void write_file_atomically(const std::string& path, std::string_view bytes);

// Makes renames and creations inside `dir` durable.
void fsync_directory(const std::string& dir);

// The whole file; errors name it.
std::string read_file(const std::string& path);

// Reads `bytes` at `offset`; errors name the file and say when it is too short.
void read_file_range(const std::string& path, size_t offset, size_t bytes, void* out);

// An exclusive flock(2) on a file, held until destruction. The file holds
// "host <name> pid <pid>" of the holder, so a refused caller can name it.
class FileLock {
 public:
  // Takes the lock or throws naming `path` and the current holder; `what`
  // says what the lock protects (e.g. "run directory checkpoints/tiny").
  FileLock(const std::string& path, const std::string& what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace llm
