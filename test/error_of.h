// error_of(fn): runs fn and returns the message of the llm::Error it throws,
// or "" when it throws none - how tests check that an error names its culprit.
#pragma once

#include <string>

#include "runtime/error.h"

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
