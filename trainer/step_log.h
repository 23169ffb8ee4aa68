// What each optimizer step reports: on rank 0's terminal, a line every
// logging.log_interval steps (and at the last step) with the interval's mean
// loss, speed, FLOP/s, memory and the slowest rank, and a warning for an
// update the spike guard skipped; in metrics.jsonl (when open), one record
// per step.
// Invariant: every rank calls record() at every step, in step order (the
// slowest rank is measured by a collective over the world at the log steps).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "collectives/group.h"
#include "base/log.h"
#include "device/memory_usage.h"
#include "schema/config.h"
#include "trainer/step_meter.h"
#include "trainer/straggler_meter.h"
#include "trainer/step_result.h"

namespace llm {

// What the log needs of the run, beyond its config.
struct StepLogRun {
  int start_step = 0;              // the first step this run takes
  double peak_flops_per_rank = 0;  // 0: unknown, no MFU
  int pipeline_stages = 1;         // > 1: the line shows the pipeline wait
  bool drops_targets = false;      // loss masks: the line shows the kept targets
  int64_t train_samples = 1;       // sequences in the training data, for epochs
  size_t device_bytes = 0;         // the arenas' bytes, for the memory figures
};

class StepLog {
 public:
  // `world`: every rank, as a host-buffer group; `metrics`: rank 0's log
  // (closed on the others). Both outlive the StepLog.
  StepLog(const Config& config, const StepLogRun& run, Group& world, MetricsLog& metrics);

  // Step `step` (0-based) took `seconds`, `waited_seconds` of them blocked on
  // other ranks.
  void record(int step, const StepResult& r, double seconds, double waited_seconds);

 private:
  using Clock = std::chrono::steady_clock;

  const Config& config_;
  StepLogRun run_;
  MetricsLog& metrics_;
  double tokens_per_step_;
  StepMeter meter_;
  MemoryMonitor memory_;
  StragglerMeter stragglers_;
  Clock::time_point start_ = Clock::now();
};

}  // namespace llm
