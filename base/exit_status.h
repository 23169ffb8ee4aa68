// How ./train ends, and what each ending tells whoever runs the job again
// (docs/failure.md#exit-statuses). The one place the statuses are defined:
// main, the abort paths, the watchdog and `./train supervise` read them here,
// and the errors main ends with 75 are of RestartableError's kind
// (base/error.h). Free of fmt: CUDA sources (nvcc) include it.
// Invariant: a status says whether running the same command again can
// succeed; 1 never does (the input is wrong), 75 may (the machine failed).
#pragma once

#include <string>

namespace llm {

inline constexpr int kExitSuccess = 0;
// Bad input (config, command line, data, checkpoint) or a failed check of
// the run's own consistency (the collectives' agreement check): the same
// command fails the same way.
inline constexpr int kExitError = 1;
// The command line asked for nothing (./train alone prints its usage).
inline constexpr int kExitUsage = 2;
// The machine or the network failed, not the input (EX_TEMPFAIL): the
// watchdog's abort on a stalled or lost rank, an error NCCL reports from its
// transport. Resuming from the last checkpoint can succeed.
inline constexpr int kExitRestartable = 75;

// What a launched job's ending means for a relaunch.
struct JobEnding {
  bool finished = false;     // exit status 0
  bool restartable = false;  // a relaunch can succeed
  std::string why;           // e.g. "exit status 75 (watchdog: a rank stalled or was lost)"
  int exit_status = 0;       // the status to exit with when giving up: 128 + signal when killed
};

// Classifies a waitpid() status of a launcher (mpirun, or ./train alone):
// 0 finished; 1, 2, 126, 127 (the launcher's "cannot execute" and "not
// found") permanent; 75, a death by a signal and 128 + N (a launcher
// reporting a rank killed by signal N, as mpirun does) restartable; any other
// status is a launcher's own failure (a lost daemon) and restartable.
JobEnding classify_job_ending(int wait_status);

}  // namespace llm
