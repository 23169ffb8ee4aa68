// error_of(fn): runs fn and returns the message of the llm::Error it throws,
// or "" when it throws none - how tests check that an error names its culprit;
// EXPECT_CONTAINS(text, part) says which part a message lacks.
#pragma once

#include <string>

#include "base/error.h"

namespace llm::test_support {

template <class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace llm::test_support

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (part) << "' not in: " << (text)
