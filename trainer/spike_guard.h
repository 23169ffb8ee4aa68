// Loss-spike guard (opt-in): decides, before each optimizer update, whether the
// step's loss or global gradient norm jumped past a configured multiple of its
// running median, in which case the trainer skips that update.
// Invariants: only accepted steps enter the medians, so a spike never raises
// the bar for the next one; the guard judges nothing until it has seen
// kMinHistory accepted steps; every rank feeds it the same (all-reduced)
// numbers, so every rank takes the same decision.
#pragma once

#include <deque>
#include <optional>
#include <string>

namespace llm {

struct SpikeVerdict {
  std::string reason;  // e.g. "loss 9.1 > 2 x median 4.2"
  double median_loss;
  double median_grad_norm;
};

class SpikeGuard {
 public:
  static constexpr int kMinHistory = 10;

  // A factor of 0 switches that check off; window = accepted steps in the medians.
  SpikeGuard(double loss_factor, double grad_norm_factor, int window);

  bool enabled() const { return loss_factor_ > 0 || grad_norm_factor_ > 0; }

  // A verdict when the step is a spike (its update should be skipped);
  // otherwise records the step and returns nothing.
  std::optional<SpikeVerdict> check(double loss, double grad_norm);

 private:
  double loss_factor_, grad_norm_factor_;
  size_t window_;
  std::deque<double> losses_, grad_norms_;
};

}  // namespace llm
