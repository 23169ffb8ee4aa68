// Owns the model state (fp32 parameters, gradients, AdamW moments; one flat
// buffer per unit) and serves it to the model through UnitProvider.
// This first version is the world of one: nothing is sharded and no
// communication happens; the parallel modes extend it.
// Invariant: gradients accumulate across micro-batches until zero_grads().
#pragma once

#include <cstddef>
#include <vector>

#include "core/arena.h"
#include "core/config.h"
#include "model/backend.h"
#include "model/layout.h"
#include "model/optimizer.h"
#include "model/unit_provider.h"

namespace llm {

struct StateBytes {
  size_t params = 0, grads = 0, optimizer = 0;
  size_t total() const { return params + grads + optimizer; }
};

class ShardingEngine : public UnitProvider {
 public:
  ShardingEngine(const ParameterLayout& layout, const Config& config, const Backend& backend);

  // Bytes this rank will hold, computed without allocating.
  static StateBytes planned_bytes(const ParameterLayout& layout);
  StateBytes bytes() const { return bytes_; }

  const float* acquire_params(int unit, Pass pass) override;
  void release_params(int unit, Pass pass) override;
  float* acquire_grads(int unit) override;
  void release_grads(int unit) override;

  void zero_grads();
  // Global L2 norm of the accumulated gradient.
  float grad_norm();
  void optimizer_step(const AdamWStep& step);

  // Full parameters of a unit (for tests, sampling and checkpoints).
  float* unit_params(int unit) { return params_[unit]; }
  float* unit_grads(int unit) { return grads_[unit]; }

 private:
  const ParameterLayout& layout_;
  const TrainingConfig& training_;
  const Backend& be_;
  StateBytes bytes_;
  Arena param_arena_, grad_arena_, optimizer_arena_;
  std::vector<float*> params_, grads_, m_, v_;  // per unit
};

}  // namespace llm
