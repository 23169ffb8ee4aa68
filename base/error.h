// Errors with context. Library code throws llm::Error, whose message carries
// what the caller knows (file, key, rank) and whose location() is the file:line
// of the check (shown only when debugging, LLM_DEBUG=1); only main() decides
// to abort. Invariant: a failed LLM_CHECK never returns.
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace llm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string location = "")
      : std::runtime_error(message), location_(std::move(location)) {}
  // "path/file.cpp:85" of the failed check ("" when unknown).
  const std::string& location() const { return location_; }

 private:
  std::string location_;
};

// An error that every rank raises alike because it comes from what they all
// read the same (the command line, the config): reported once, not per rank.
class CollectiveError : public Error {
 public:
  explicit CollectiveError(const Error& error) : Error(error.what(), error.location()) {}
};

// A failure of the machine or the network, not of the input (an error NCCL
// reports from its transport): main ends the job with kExitRestartable
// (base/exit_status.h).
class RestartableError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] inline void throw_error(const char* file, int line, const std::string& message) {
  throw Error(message, fmt::format("{}:{}", file, line));
}

// Whether LLM_DEBUG is set (to anything but "" or "0"): error reports then
// carry the source location of the failed check.
inline bool debug_enabled() {
  const char* value = std::getenv("LLM_DEBUG");
  return value && *value && std::strcmp(value, "0") != 0;
}

// The one line main() prints for an exception.
inline std::string error_report(const std::exception& e) {
  const Error* error = dynamic_cast<const Error*>(&e);
  if (debug_enabled() && error && !error->location().empty()) {
    return fmt::format("{} ({})", e.what(), error->location());
  }
  return e.what();
}

}  // namespace llm

// LLM_CHECK(cond, "format {}", args...): throws llm::Error with the formatted
// message and the source location when cond is false.
#define LLM_CHECK(cond, ...)                                                       \
  do {                                                                             \
    if (!(cond)) ::llm::throw_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

#define LLM_FAIL(...) ::llm::throw_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__))
