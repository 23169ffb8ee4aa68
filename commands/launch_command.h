// The command `./train supervise` runs: a launcher's command line such as
// `mpirun -np 4 --hostfile hosts ./train --config tiny --training.steps=60`,
// or `./train --config tiny` alone. What the supervisor reads from it (the
// trainer's config: its run directory, mesh and batch; the launcher's world
// size and hostfile) and the same line at another world size on another
// hostfile, for a restart on fewer hosts.
// Invariant: the trainer's arguments are those from the first --config on,
// and the launcher's options are those before them; a rewritten line
// differs from the original only in the values of -np and --hostfile.
#pragma once

#include <string>
#include <vector>

namespace llm {

struct LaunchCommand {
  std::vector<std::string> argv;
  // The trainer's --config value and its --section.key=value overrides.
  std::string config;
  std::vector<std::string> overrides;
  // The launcher's -np / -n / --np value (0 when not given) and its
  // --hostfile / -hostfile / --machinefile / -machinefile value ("" when not).
  int world_size = 0;
  std::string hostfile;
};

// Reads `argv`; refused, with one line, when it has no --config FILE or the
// trainer's arguments are not --config and overrides.
LaunchCommand launch_command_read(const std::vector<std::string>& argv);

// The same command line with `world_size` ranks on `hostfile`.
std::vector<std::string> launch_command_with_hosts(const LaunchCommand& command, int world_size,
                                                   const std::string& hostfile);

}  // namespace llm
