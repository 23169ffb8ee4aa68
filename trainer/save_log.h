// What each checkpoint save reports: on rank 0's terminal a line when a
// background save starts (the step loop's stall) and one when `latest`
// names a save (its write time beside the stall); in metrics.jsonl (when
// open) one record per completed save:
//   {"event": "checkpoint", "step", "stall_seconds", "waited_seconds",
//    "write_seconds", "background"}
// A blocking save's stall is its write time.
#pragma once

#include "persistence/background_save.h"
#include "base/log.h"

namespace llm {

// The background save `saver` started last.
void log_save_started(const BackgroundSaver& saver);

// A save that `latest` now names.
void log_save_completed(const SaveReport& report, bool background, MetricsLog& metrics);

}  // namespace llm
