// The training run the mpirun tests compare against each other: a few steps
// of a config on some group, recording each step's loss and gradient norm,
// the traffic of the data-parallel and tensor groups over those steps, the
// bytes the engine holds, and the whole model's parameters afterwards.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "trainer/trainer.h"

namespace llm {

// Overrides every comparison shares: a global batch of 12 sequences in
// micro-batches of 1 (the same sample set at any world size), a short warm-up,
// no metrics file and no resume.
inline std::vector<std::string> comparison_overrides(const std::string& run_dir) {
  return {"training.batch_size=12", "training.micro_batch_size=1", "training.warmup_steps=2",
          "training.lr=1e-3",       "logging.metrics=false",       "checkpoint.resume=none",
          "checkpoint.dir=" + run_dir};
}

struct RunResult {
  std::vector<float> losses, grad_norms;
  std::vector<float> params;  // the whole model's, after the steps
  StateBytes bytes;
  CommStats data_comm;    // shard + replicate groups, over the steps
  CommStats tensor_comm;  // the tensor group, over the steps
};

inline RunResult run_steps(Group& world, const Config& config, int steps) {
  Trainer trainer(config, world);
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    StepResult step = trainer.train_step(s);
    r.losses.push_back(step.loss);
    r.grad_norms.push_back(step.grad_norm);
  }
  // The steps' traffic, before gathering the parameters below.
  r.data_comm = trainer.topology().shard->stats();
  r.data_comm.add(trainer.topology().replicate->stats());
  r.tensor_comm = trainer.topology().tensor->stats();
  r.params = trainer.engine().gather_all_params();
  r.bytes = trainer.engine().bytes();
  return r;
}

inline float max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace llm
