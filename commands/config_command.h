// `./train config`: every config key's reference, or a config resolved (file,
// then overrides) as TOML, or its parameter and FLOP counts as JSON.
#pragma once

#include <string>

#include "commands/command.h"

namespace llm {

struct ConfigArguments {
  static constexpr const char* kName = "config";
  static constexpr const char* kAbout =
      "Without --config: every config key with its type, default and meaning. With it: the "
      "resolved config (file, then overrides) as TOML.";
  static constexpr bool kTakesOverrides = true;

  std::string config;
  bool counts = false;

  template <class V>
  void visit_fields(V&& v) {
    v("config", config, kConfigOptionDoc, "FILE");
    v("counts", counts, "with --config: its parameters and FLOPs per step as JSON instead");
  }
};

int run_config(const ConfigArguments& arguments, const CommandLine& line);

}  // namespace llm
