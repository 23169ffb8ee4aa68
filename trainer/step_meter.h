// What a log line reports: the steps since the previous line, summed and
// averaged (a single step's tokens/s is noisy on small models, and the loss of
// the interval's last step hides the others).
// Invariant: every step is counted in exactly one interval; take() ends one
// and starts the next.
#pragma once

#include <cmath>

namespace llm {

struct StepInterval {
  int steps = 0;
  double mean_loss = 0;
  double tokens_per_s = 0;
  double ms_per_step = 0;
  double flops_per_rank = 0;  // achieved model FLOP/s per rank
  double mfu = NAN;           // flops_per_rank / the peak; NAN without one
  double pipeline_wait = 0;   // fraction of the time spent waiting for other stages
};

class StepMeter {
 public:
  // Model FLOPs and tokens of one step of the whole world, its rank count,
  // and one rank's peak FLOP/s (0: unknown, no MFU).
  StepMeter(double flops_per_step, double tokens_per_step, int ranks, double peak_flops_per_rank)
      : flops_per_step_(flops_per_step),
        tokens_per_step_(tokens_per_step),
        ranks_(ranks),
        peak_(peak_flops_per_rank) {}

  void add(double loss, double seconds, double pipeline_wait_seconds) {
    ++steps_;
    loss_sum_ += loss;
    seconds_ += seconds;
    wait_ += pipeline_wait_seconds;
  }

  // Achieved model FLOP/s per rank of `steps` steps taking `seconds`, and
  // what share of the peak that is (NAN without a peak).
  double flops_per_rank(int steps, double seconds) const {
    return flops_per_step_ * steps / seconds / ranks_;
  }
  double mfu(double flops_per_rank) const { return peak_ > 0 ? flops_per_rank / peak_ : NAN; }

  StepInterval take() {
    StepInterval i;
    i.steps = steps_;
    if (steps_ > 0 && seconds_ > 0) {
      i.mean_loss = loss_sum_ / steps_;
      i.tokens_per_s = tokens_per_step_ * steps_ / seconds_;
      i.ms_per_step = seconds_ / steps_ * 1e3;
      i.flops_per_rank = flops_per_rank(steps_, seconds_);
      i.mfu = mfu(i.flops_per_rank);
      i.pipeline_wait = wait_ / seconds_;
    }
    steps_ = 0;
    loss_sum_ = seconds_ = wait_ = 0;
    return i;
  }

 private:
  double flops_per_step_, tokens_per_step_;
  int ranks_;
  double peak_;
  int steps_ = 0;
  double loss_sum_ = 0, seconds_ = 0, wait_ = 0;
};

}  // namespace llm
