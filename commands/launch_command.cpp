// Reading and rewriting the launcher's command line (launch_command.h).
#include "commands/launch_command.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "base/cli_values.h"
#include "base/error.h"

namespace llm {
namespace {

constexpr std::array<std::string_view, 3> kWorldSizeOptions = {"-np", "-n", "--np"};
constexpr std::array<std::string_view, 4> kHostfileOptions = {"--hostfile", "-hostfile",
                                                              "--machinefile", "-machinefile"};

size_t config_index(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--config" || argv[i].rfind("--config=", 0) == 0) return i;
  }
  LLM_FAIL(
      "./train supervise: the command after -- has no --config FILE (it must run ./train "
      "--config FILE ...)");
}

// The index of the value of the first of `names` among the launcher's
// options (argv[0, end)), or argv.size() when none is given.
template <size_t N>
size_t option_value_index(const std::vector<std::string>& argv, size_t end,
                          const std::array<std::string_view, N>& names) {
  for (size_t i = 0; i + 1 < end; ++i) {
    if (std::find(names.begin(), names.end(), argv[i]) != names.end()) return i + 1;
  }
  return argv.size();
}

}  // namespace

LaunchCommand launch_command_read(const std::vector<std::string>& argv) {
  LaunchCommand command;
  command.argv = argv;
  const size_t trainer = config_index(argv);
  std::vector<const char*> trainer_argv = {"train"};
  for (size_t i = trainer; i < argv.size(); ++i) trainer_argv.push_back(argv[i].c_str());
  const CommandLine line =
      parse_command_line(static_cast<int>(trainer_argv.size()), trainer_argv.data(), {});
  for (const auto& [name, value] : line.options) {
    LLM_CHECK(name == "config",
              "./train supervise: the command after -- runs ./train with --{}; it must train "
              "(./train --config FILE [--section.key=value ...])",
              name);
    command.config = value;
  }
  command.overrides = line.overrides;
  if (const size_t i = option_value_index(argv, trainer, kWorldSizeOptions); i < argv.size()) {
    const std::string name = argv[i - 1].substr(argv[i - 1].find_first_not_of('-'));
    command.world_size = static_cast<int>(parse_integer(argv[i], name));
  }
  if (const size_t i = option_value_index(argv, trainer, kHostfileOptions); i < argv.size())
    command.hostfile = argv[i];
  return command;
}

std::vector<std::string> launch_command_with_hosts(const LaunchCommand& command, int world_size,
                                                   const std::string& hostfile) {
  std::vector<std::string> argv = command.argv;
  const size_t trainer = config_index(argv);
  const size_t world = option_value_index(argv, trainer, kWorldSizeOptions);
  const size_t hosts = option_value_index(argv, trainer, kHostfileOptions);
  LLM_CHECK(world < argv.size() && hosts < argv.size(),
            "./train supervise: a restart on other hosts rewrites the launcher's -np N and "
            "--hostfile FILE; the command after -- lacks {}",
            world < argv.size() ? "--hostfile" : "-np");
  argv[world] = std::to_string(world_size);
  argv[hosts] = hostfile;
  return argv;
}

}  // namespace llm
