// The config of a command and the world it runs in (see command.h).
#include "commands/command.h"

#include "interop/hf_llama.h"
#include "base/log.h"
#include "base/system.h"

namespace llm {

Config command_config(const std::string& path, const CommandLine& line) {
  return alike_on_every_rank(
      [&] { return config_load(path, line.overrides, hf_import_architecture); });
}

Group& join_world() {
  Group& world = comm_world();
  log_setup(world.rank());
  configure_threads(comm_local_size());
  return world;
}

}  // namespace llm
