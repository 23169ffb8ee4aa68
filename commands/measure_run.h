// Measuring real step times by running the real trainer: `mpirun -np N
// ./train --config X ...` with the run's overrides plus a few that keep it
// short (no evaluation, no checkpoints, metrics on), then reading the step
// times it logged to metrics.jsonl. Used by `./train scale --validate`,
// `--measure` and `--calibrate`.
// Invariant: the measured time is the median ms_per_step of the steps after
// the first (which pays for allocation and warm-up), as the trainer itself
// logged it on rank 0; with repeats > 1, the least such median of that many
// runs (on a shared machine, the run other jobs disturbed least).
#pragma once

#include <string>
#include <vector>

namespace llm {

// <system temp dir>/llm_scale_runs: measurement runs stay out of the repository.
std::string default_work_dir();

struct MeasureOptions {
  // How to start N ranks (the command, before "-np N"). On a cluster, e.g.
  // "mpirun --hostfile hosts"; here ranks share one machine.
  std::string launcher = "mpirun --oversubscribe --bind-to none";
  std::string train_binary = "./train";
  int steps = 6;    // measured: steps - 1
  int repeats = 1;  // runs per point; the fastest run's median counts
  // Run directories and logs (metrics.jsonl, run.log), kept for inspection.
  std::string work_dir = default_work_dir();
};

// Seconds per step of `config_path` with `overrides` on `ranks` ranks.
// Throws, naming the log file, when the run fails.
double measure_step_seconds(const std::string& config_path,
                            const std::vector<std::string>& overrides, int ranks,
                            const MeasureOptions& options);

// Runs a shell command with mpirun's root-permission variables set; returns
// its exit status.
int run_command(const std::string& command);

}  // namespace llm
