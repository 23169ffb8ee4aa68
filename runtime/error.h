// Errors with context. Library code throws llm::Error (message carries file:line
// of the check, plus whatever the caller adds: file, key, rank); only main()
// decides to abort. Invariant: a failed LLM_CHECK never returns.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace llm {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void throw_error(const char* file, int line, const std::string& message) {
  throw Error(fmt::format("{} ({}:{})", message, file, line));
}

}  // namespace llm

// LLM_CHECK(cond, "format {}", args...): throws llm::Error with the formatted
// message and the source location when cond is false.
#define LLM_CHECK(cond, ...)                                                   \
  do {                                                                         \
    if (!(cond)) ::llm::throw_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

#define LLM_FAIL(...) ::llm::throw_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__))
