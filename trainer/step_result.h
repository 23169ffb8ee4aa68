// What one optimizer step returns to the training loop (trainer.h) and its
// log (step_log.h).
#pragma once

#include <cstdint>
#include <optional>

#include "trainer/spike_guard.h"

namespace llm {

struct StepResult {
  float loss;                // the mean over the global batch's kept targets
  int64_t kept_targets = 0;  // of the global batch (all of them without loss masks)
  float grad_norm;
  float lr;
  std::optional<SpikeVerdict> skipped;  // set when the spike guard skipped the update
  double pipeline_wait_seconds = 0;     // this rank's wait for neighbouring stages' messages
};

}  // namespace llm
