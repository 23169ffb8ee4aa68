// What differs between the config a checkpoint was saved with and the
// current one, sorted by what each change means on resume (the key's rule,
// schema/key_rules.h): another model, or another trajectory.
#pragma once

#include <string>
#include <vector>

#include "schema/config.h"

namespace llm {

// Each entry "table.key: <saved> -> <current>" (TOML values).
struct ConfigChanges {
  std::vector<std::string> model;     // keys that change the model: the resume is refused
  std::vector<std::string> schedule;  // keys that change the trajectory: logged
};
ConfigChanges checkpoint_config_changes(const std::string& path, const Config& current);

}  // namespace llm
