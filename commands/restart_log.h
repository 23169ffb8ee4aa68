// The record of each restart a supervisor makes: one JSON line appended to
// <run dir>/restarts.jsonl and, when the run writes TensorBoard events, the
// record's numbers as scalars at the step resumed from (tagged restart/...,
// by the rule metrics.jsonl's records follow: tensorboard/metrics_events.h).
// Invariant: a line is on disk (fsynced) before the relaunch it announces;
// each restart's events go in an event file of their own, written before
// the relaunch, so the resumed run's own start (which makes TensorBoard
// forget the steps after its checkpoint) never hides them.
#pragma once

#include <string>
#include <vector>

namespace llm {

struct RestartRecord {
  int restart = 0;               // 1 for the first restart
  std::string time;              // UTC, ISO 8601, when the failure was seen
  std::string why;               // e.g. "killed by signal 9 (Killed)"
  std::string error;             // the failing rank's own message, "" when none
  int exit_status = 0;           // the launcher's, 128 + N for a signal N
  int rank = -1;                 // named in the job's output, -1 when none
  std::string host;              // named or placed, "" when unknown
  int resumed_from_step = 0;     // the step of `latest`, 0 without a checkpoint
  double time_lost_seconds = 0;  // work since that checkpoint was written, plus the backoff
  double backoff_seconds = 0;
  int world_size = 0;  // of the relaunch, 0 when the command does not say
  std::vector<std::string> hosts_set_aside;
};

// The record as restarts.jsonl's line (without the newline).
std::string restart_record_json(const RestartRecord& record);

// Appends the record to `run_dir`/restarts.jsonl and, when
// `tensorboard_dir` is not "", writes its scalars there.
void restart_log_write(const std::string& run_dir, const std::string& tensorboard_dir,
                       const RestartRecord& record);

}  // namespace llm
