// Entry point: ./train [command] [--option ...] [--section.key=value ...].
// The commands and their options are declared in commands/ (each command's
// arguments struct, command_options.h), and so is their usage: ./train -h.
// Only main decides to exit: every failure below it is an llm::Error, printed
// as one line on stderr (naming the rank) with a non-zero exit status; under
// mpirun a failing rank aborts the whole job. Errors of the command line and
// the config, alike on every rank, are printed once, by rank 0. The source
// location of a failed check is shown only with LLM_DEBUG=1.
#include <cstdio>
#include <string>
#include <vector>

#include "commands/bench_command.h"
#include "commands/command.h"
#include "commands/config_command.h"
#include "commands/export_command.h"
#include "commands/generate_command.h"
#include "commands/plan.h"
#include "commands/prepare_command.h"
#include "commands/scaling.h"
#include "commands/supervise_command.h"
#include "base/exit_status.h"
#include "base/log.h"
#include "collectives/signal_thread.h"
#include "trainer/trainer.h"

namespace {

// `./train [train]`: the training run.
struct TrainArguments {
  static constexpr const char* kName = "train";
  static constexpr const char* kAbout =
      "Train. Any config key can be overridden, e.g. --training.steps=20 or --training.steps 20. "
      "Set LLM_DEBUG=1 for source locations in errors.";
  static constexpr bool kTakesOverrides = true;

  std::string config;

  template <class V>
  void visit_fields(V&& v) {
    v("config", config, llm::kConfigOptionDoc, llm::required("FILE"));
  }
};

int run_train(const TrainArguments& arguments, const llm::CommandLine& line) {
  llm::Group& world = llm::join_world();
  llm::Trainer trainer(llm::command_config(arguments.config, line), world);
  trainer.run();
  return 0;
}

// Every command, in the usage's order.
const std::vector<llm::Command>& all_commands() {
  static const std::vector<llm::Command> commands = {
      llm::command(llm::run_config),   llm::command(run_train),
      llm::command(llm::run_prepare),  llm::command(llm::run_plan),
      llm::command(llm::run_scale),    llm::command(llm::run_export),
      llm::command(llm::run_generate), llm::command(llm::run_bench),
      llm::command(llm::run_supervise)};
  return commands;
}

const llm::Command* find_command(const std::string& name) {
  for (const llm::Command& command : all_commands()) {
    if (command.spec.name == name) return &command;
  }
  return nullptr;
}

std::string usage() {
  std::string text = "usage:\n";
  for (const llm::Command& command : all_commands()) text += llm::command_usage(command.spec);
  return text;
}

bool asks_for_help(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "help") return true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return false;  // the rest is supervise's command to run
    if (arg == "-h" || arg == "--help") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // Lines appear as they are printed, also through a pipe or mpirun (a
  // benchmark's rows as each is measured), not when a block buffer fills.
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  llm::log_setup(0);
  try {
    // Before any other thread exists: signals are then taken by a thread of
    // their own, never by one that runs oneDNN's kernels (collectives/signal_thread.h).
    llm::signal_thread_start();
    if (asks_for_help(argc, argv)) {
      std::fputs(usage().c_str(), stdout);
      return 0;
    }
    const llm::CommandLine line = llm::alike_on_every_rank([&] {
      return llm::parse_command_line(argc, argv, [](const std::string& name) {
        const llm::Command* command = find_command(name);
        return command ? command->spec.flags() : std::vector<std::string>{};
      });
    });
    if (argc == 1) {
      std::fputs(usage().c_str(), stdout);
      return llm::kExitUsage;
    }
    const llm::Command* command = find_command(line.command);
    llm::alike_on_every_rank([&] {
      std::vector<std::string> names;
      for (const llm::Command& known : all_commands()) names.push_back(known.spec.name);
      LLM_CHECK(command, "unknown command '{}'{} (see ./train --help)", line.command,
                llm::did_you_mean(line.command, names));
    });
    return command->run(line);
  } catch (const llm::CollectiveError& e) {
    llm::comm_abort_collective(llm::error_report(e));
  } catch (const llm::RestartableError& e) {
    llm::comm_abort(llm::error_report(e), llm::kExitRestartable);
  } catch (const std::exception& e) {
    // Under mpirun this takes every rank down, so none waits on a dead peer.
    llm::comm_abort(llm::error_report(e));
  }
}
