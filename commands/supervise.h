// `./train supervise [options] -- LAUNCHER ...`: runs a training job's
// command (mpirun ... ./train --config X ..., or ./train alone) and runs it
// again after a failure a restart can fix, each time resuming from the run
// directory's `latest` (the same command resumes). Given a hostfile in the
// command, a host that keeps failing is set aside and the job comes back on
// the hosts left, at the largest world size the config fits; the global
// batch (training.batch_size) stays, with more gradient accumulation.
// docs/failure.md#a-job-that-comes-back-train-supervise.
// Invariant: what cannot succeed again (exit status 1: bad input, a failed
// agreement check) is never rerun; every restart is in restarts.jsonl
// before its relaunch.
#pragma once

#include <string>
#include <vector>

namespace llm {

struct SuperviseOptions {
  int max_restarts = 3;
  double backoff_seconds = 10;  // before the first restart; doubled each time, at most 5 min
  std::string run_dir;          // "" : the config's (checkpoint.dir, else checkpoints/<name>)
  int set_aside_after = 2;      // failures in a row naming a host that set it aside
  int retry_after = 3;          // launches a host set aside sits out
};

// Runs the job until it finishes, fails for good or has used its restarts;
// returns the exit status to end with (the job's last).
int supervise_command(const std::vector<std::string>& launcher_argv,
                      const SuperviseOptions& options);

}  // namespace llm
