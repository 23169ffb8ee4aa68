// What every subcommand shares: its entry as ./train dispatches it (the spec
// its arguments struct declares, command_options.h, and how it runs), reading
// what every rank reads alike with its errors reported once, the config
// named by --config, and joining the MPI world.
#pragma once

#include <functional>
#include <string>

#include "parallel/comm.h"
#include "base/cli_values.h"
#include "base/error.h"
#include "schema/command_options.h"
#include "schema/config.h"

namespace llm {

// The doc of every command's --config option.
inline constexpr const char* kConfigOptionDoc =
    "the config: a path, or a name looked up in configs/ (e.g. tiny)";

// Runs `read`, which reads what every rank reads alike (the command line, the
// config): its errors are reported once, not once per rank.
template <class F>
auto alike_on_every_rank(F&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw CollectiveError(e);
  }
}

// A subcommand as ./train dispatches it.
struct Command {
  CommandSpec spec;
  std::function<int(const CommandLine&)> run;  // reads its arguments, runs; the exit status
};

// The command whose arguments `run` takes: run gets them read from the
// command line as Arguments declares them, and the command line itself (its
// overrides, which options were given).
template <class Arguments>
Command command(int (*run)(const Arguments&, const CommandLine&)) {
  return {command_spec<Arguments>(), [run](const CommandLine& line) {
            return run(alike_on_every_rank([&] { return parse_arguments<Arguments>(line); }), line);
          }};
}

// The config `path` names with the command line's overrides, the
// architecture of model.init_from imported; its errors reported once.
Config command_config(const std::string& path, const CommandLine& line);

// Joins the MPI world (a world of one without mpirun), quiets ranks other
// than 0 and shares the node's cores among its ranks.
Group& join_world();

}  // namespace llm
