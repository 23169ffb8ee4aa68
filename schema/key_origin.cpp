// Where a config key's value came from (see key_origin.h).
#include "schema/key_origin.h"

#include <fmt/format.h>

namespace llm {
namespace {

// The command-line override that set `key` last, if any.
std::optional<std::string> override_of(const Config& config, std::string_view key) {
  for (auto it = config.overrides.rbegin(); it != config.overrides.rend(); ++it) {
    if (it->size() > key.size() && it->compare(0, key.size(), key) == 0 &&
        (*it)[key.size()] == '=') {
      return fmt::format("command line --{}", *it);
    }
  }
  return std::nullopt;
}

}  // namespace

std::string KeyOrigin::operator()(std::initializer_list<std::string_view> keys) const {
  for (std::string_view key : keys) {
    if (std::optional<std::string> origin = override_of(config_, key)) return *origin;
  }
  for (std::string_view key : keys) {
    if (config_.file_keys.contains(std::string(key))) return config_.path;
    if (auto imported = config_.imported.find(std::string(key)); imported != config_.imported.end())
      return imported->second;
  }
  return config_.path;
}

std::optional<std::string> config_user_origin(const Config& config, std::string_view key) {
  if (std::optional<std::string> origin = override_of(config, key)) return origin;
  if (config.file_keys.contains(std::string(key))) return config.path;
  return std::nullopt;
}

}  // namespace llm
