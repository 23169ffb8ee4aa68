// The progress line of one slow training step on a terminal: the micro-batch
// and pass under way, the share of the step done, elapsed time and ETA. It
// stands between the model and the sharding engine as the UnitProvider, so the
// line moves at every unit boundary (a 96 s step of 32 blocks moves every
// second or so, not once per micro-batch). Work is counted per unit pass: a
// forward pass of a unit weighs 1, its backward 2 (3 when it recomputes the
// forward: full activation recomputation).
// Invariants: every UnitProvider call is forwarded unchanged and in order, so
// the step computes and communicates exactly as it would without it; nothing
// is shown for a step shorter than kShowAfterSeconds, nor off a terminal.
#pragma once

#include <cstdint>
#include <string>

#include "base/progress.h"
#include "model/layout.h"
#include "model/unit_provider.h"

namespace llm {

class StepProgress : public UnitProvider {
 public:
  static constexpr double kShowAfterSeconds = 2;

  // `layout`: this rank's (its stage runs the units it holds, each released
  // once per backward pass); `enabled`: this rank shows progress (rank 0).
  StepProgress(UnitProvider& units, const ParameterLayout& layout, std::string label,
               int micro_batches, bool full_recompute, bool enabled,
               ProgressOutput output = progress_stdout());

  // Micro-batch `micro` starts its forward / backward pass.
  void forward(int micro) { begin_pass(micro, /*backward=*/false); }
  void backward(int micro) { begin_pass(micro, /*backward=*/true); }

  const void* acquire_params(int unit, Pass pass) override {
    return units_.acquire_params(unit, pass);
  }
  void release_params(int unit, Pass pass) override;
  float* acquire_grads(int unit) override { return units_.acquire_grads(unit); }
  void release_grads(int unit) override;
  uint64_t params_version() const override { return units_.params_version(); }

 private:
  void begin_pass(int micro, bool backward);
  // One more unit of the current pass is done (a tied embedding, released
  // twice in a forward pass, counts once: a pass counts at most its units).
  void unit_done();

  UnitProvider& units_;
  int micro_batches_, units_per_pass_, backward_weight_;
  Progress progress_;
  uint64_t passes_work_ = 0;  // the work of the passes before the current one
  int pass_weight_ = 0;       // 0 before the first pass
  int pass_units_ = 0;        // units the current pass has finished
};

}  // namespace llm
