// Which rank, and which host, a failed job's output names, for
// restarts.jsonl and for setting a failing host aside. Read from the lines
// the job prints as it ends, most specific first:
//   mpirun's "process rank 2 with PID 812 on node hostb exited on signal 9"
//   the watchdog's "never reached by: rank 3 (no answer: ...)", then any
//     "never reached by: rank 3", then "other ranks not answering: 3"
//   the first "rank 1: error: ..." of a rank that failed
// and the message of the first rank that reported an error of its own
// ("NCCL error: ncclAllReduce (...) failed: ..."), the reason a restart
// records beside the exit status.
// Invariant: a rank or host is named only when a line names it; the output
// of an unknown launcher names nothing (rank -1, host "").
#pragma once

#include <string>

namespace llm {

struct FailureCulprit {
  int rank = -1;
  std::string host;   // "" when the output names none
  std::string error;  // the first "rank N: error: " line's message, "" when none
};

FailureCulprit failure_culprit(const std::string& output);

}  // namespace llm
