// `./train supervise [options] -- LAUNCHER ...`: a job run again after a
// failure a restart can fix (supervise.h), its options declared once
// (command_options.h); the launcher's words after -- are kept as given.
#pragma once

#include "commands/command.h"
#include "commands/supervise.h"

namespace llm {

struct SuperviseArguments : SuperviseOptions {
  static constexpr const char* kName = "supervise";
  static constexpr const char* kAbout =
      "Run LAUNCHER (e.g. mpirun -np 4 ./train --config FILE ..., or ./train --config FILE alone) "
      "and, after a failure a restart can fix (a rank killed, stopped or lost: the watchdog's exit "
      "status 75, a signal, a launcher's failure), run it again: it resumes from the run "
      "directory's latest checkpoint. Exit status 1 (bad input, a failed agreement check) is "
      "never retried. Each restart is a line of DIR/restarts.jsonl and TensorBoard scalars "
      "restart/... at the step resumed from. With --hostfile FILE and -np N in LAUNCHER, a host "
      "that keeps failing is set aside: the job restarts on the hosts left (DIR/hostfile) at the "
      "largest world size the config fits, keeping training.batch_size by more gradient "
      "accumulation.";
  static constexpr bool kTakesOverrides = false;
  static constexpr const char* kAfterDashes = "LAUNCHER ...";

  template <class V>
  void visit_fields(V&& v) {
    v("max-restarts", max_restarts, "restarts at most", OptionRule("N", at_least(0)));
    v("backoff", backoff,
      "the wait before the first restart; each next waits twice as long (at most 5 min)");
    v("run-dir", run_dir,
      "the run directory, where restarts.jsonl goes; by default the config's checkpoint.dir",
      "DIR");
    v("set-aside-after", set_aside_after,
      "failures in a row naming a host that set it aside (with --hostfile in LAUNCHER)",
      OptionRule("N", at_least(1)));
    v("retry-after", retry_after, "launches a host set aside sits out",
      OptionRule("N", at_least(1)));
  }
};

int run_supervise(const SuperviseArguments& arguments, const CommandLine& line);

}  // namespace llm
