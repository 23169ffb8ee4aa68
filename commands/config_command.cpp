// `./train config` (see config_command.h).
#include "commands/config_command.h"

#include <cstdio>

#include "commands/model_counts.h"

namespace llm {

int run_config(const ConfigArguments& arguments, const CommandLine& line) {
  if (arguments.config.empty()) {
    alike_on_every_rank([&] {
      LLM_CHECK(line.overrides.empty() && !arguments.counts,
                "./train config: overrides and --counts need --config FILE");
    });
    std::fputs(config_reference().c_str(), stdout);
    return 0;
  }
  const Config config = command_config(arguments.config, line);
  const std::string text = arguments.counts ? model_counts_json(config) : config_to_toml(config);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace llm
