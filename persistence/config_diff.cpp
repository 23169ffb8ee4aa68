// The saved config against the current one (see config_diff.h).
#include "persistence/config_diff.h"

#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "persistence/meta_schema.h"
#include "base/error.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// "table.key" -> the value as TOML text, for the tables of a config dump; a
// key saved under an earlier name appears under its current one.
std::map<std::string, std::string> config_values(const std::string& toml_text,
                                                 const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    LLM_FAIL("{}: the saved config is not valid TOML: {}", origin, e.description());
  }
  std::map<std::string, std::string> values;
  for (const auto& [table_name, table] : root) {
    if (!table.is_table()) continue;
    for (const auto& [key, node] : *table.as_table()) {
      std::ostringstream text;
      node.visit([&](const auto& value) { text << value; });
      const std::string name = std::string(table_name.str()) + "." + std::string(key.str());
      values[renamed_key(name).value_or(name)] = text.str();
    }
  }
  return values;
}

}  // namespace

ConfigChanges checkpoint_config_changes(const std::string& path, const Config& current) {
  const std::string meta_path = (fs::path(path) / "meta.json").string();
  const json meta = read_meta(path, nullptr);
  const auto saved = config_values(meta.at("config").get<std::string>(), meta_path);
  const auto now = config_values(config_to_toml(current), current.path);
  // A key the saving build did not have is no change at its default.
  const auto defaults = config_values(config_to_toml(Config{}), "the defaults");
  std::set<std::string> keys;
  for (const auto& [key, value] : saved) keys.insert(key);
  for (const auto& [key, value] : now) keys.insert(key);
  ConfigChanges changes;
  for (const std::string& key : keys) {
    auto was = saved.find(key), is = now.find(key);
    const std::string before = was == saved.end() ? "(absent)" : was->second;
    const std::string after = is == now.end() ? "(absent)" : is->second;
    if (before == after) continue;
    const auto default_value = defaults.find(key);
    if (was == saved.end() && default_value != defaults.end() && default_value->second == after)
      continue;
    const std::string change = fmt::format("{}: {} -> {}", key, before, after);
    // A key this build no longer knows is listed, not ignored.
    switch (config_key_on_resume(key).value_or(OnResume::changes_trajectory)) {
      case OnResume::changes_model:
        changes.model.push_back(change);
        break;
      case OnResume::changes_trajectory:
        changes.schedule.push_back(change);
        break;
      case OnResume::same_trajectory:
        break;
    }
  }
  return changes;
}

}  // namespace llm
