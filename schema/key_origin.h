// Where a config key's value came from, for errors that name it: the
// command-line override that set it last, the config file, or the
// checkpoint it was imported from.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "schema/config.h"

namespace llm {

// Where a key's value came from, for validation errors: the command-line
// override that set it (the last one wins), else the config file when it
// sets it, else where it was imported from, else the config file (a default).
// Given several keys (a rule that relates them), the first that was set.
class KeyOrigin {
 public:
  explicit KeyOrigin(const Config& config) : config_(config) {}
  std::string operator()(std::initializer_list<std::string_view> keys) const;
  std::string operator()(std::string_view key) const { return (*this)({key}); }

 private:
  const Config& config_;
};

}  // namespace llm
