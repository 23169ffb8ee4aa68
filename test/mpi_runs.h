// The training run the mpirun tests compare against each other: a few steps
// of a config on some group, recording each step's loss and gradient norm,
// the traffic of the data-parallel and tensor groups over those steps, the
// bytes the engine holds, and the whole model's parameters afterwards; and
// the comparisons they share: against the single-process curve, and a
// resumed run against the one that never stopped.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "parallel/comm.h"
#include "trainer/trainer.h"

namespace llm {

// A directory of suite `suite` under the system's temporary directory, one
// per world size (ctest runs a suite at several sizes side by side).
inline std::string mpi_temp_dir(const std::string& suite, const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("llm_mpi_" + suite + "_np" + std::to_string(comm_world().size()) + "_" + name))
      .string();
}

// Overrides every comparison shares: a global batch of 12 sequences in
// micro-batches of 1 (the same sample set at any world size), a short warm-up,
// no metrics file and no resume.
inline std::vector<std::string> comparison_overrides(const std::string& run_dir) {
  return {"training.batch_size=12",   "training.micro_batch_size=1", "training.warmup_steps=2",
          "training.lr=1e-3",         "logging.metrics=false",       "checkpoint.resume=none",
          "checkpoint.dir=" + run_dir};
}

// fp32 tolerance of a parallel run's losses and parameters against the
// single process: a reduction across ranks (or a tensor-parallel matmul's
// partial sums, or a gradient norm summed per stage) adds in another order
// (~1e-7 relative per step), and AdamW's normalized update passes such
// differences through at most about lr (here <= 1.2e-3) per element.
constexpr float kCurveTolerance = 2e-5f;

// The "ragged" model the mpirun suites share: 40 wide (units no world here
// divides evenly), 4 query heads over `kv_heads`, ffn 100, an untied LM head.
inline std::vector<std::string> ragged_model_overrides(int kv_heads) {
  return {"model.dim=40", "model.n_heads=4", "model.n_kv_heads=" + std::to_string(kv_heads),
          "model.ffn_dim=100", "model.tie_embeddings=false"};
}

struct RunResult {
  std::vector<float> losses, grad_norms;
  std::vector<float> params;  // the whole model's, after the steps
  StateBytes bytes;
  CommStats data_comm;    // shard + replicate groups, over the steps
  CommStats tensor_comm;  // the tensor group, over the steps
};

// `prepare`, when given, sees the trainer before its first step.
inline RunResult run_steps(Group& world, const Config& config, int steps,
                           const std::function<void(Trainer&)>& prepare = {}) {
  Trainer trainer(config, world);
  if (prepare) prepare(trainer);
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
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// `run` against the single-process run of the same global batch: each step's
// loss within `tolerance`, its gradient norm within 1e-4 relative, and every
// parameter after the steps within `tolerance`.
inline void expect_same_curve(const RunResult& run, const RunResult& reference, float tolerance) {
  ASSERT_EQ(run.losses.size(), reference.losses.size());
  ASSERT_EQ(run.params.size(), reference.params.size());
  for (size_t s = 0; s < run.losses.size(); ++s) {
    EXPECT_NEAR(run.losses[s], reference.losses[s], tolerance) << "step " << s + 1;
    EXPECT_NEAR(run.grad_norms[s], reference.grad_norms[s], 1e-4f * reference.grad_norms[s])
        << "step " << s + 1;
  }
  EXPECT_LE(max_abs_difference(run.params, reference.params), tolerance);
}

// A run resumed from config.checkpoint.resume (saved after step `from`) on
// `group`, through step `to`: the losses of steps from + 1 .. to and the
// parameters after.
inline RunResult resume_steps(Group& group, const Config& config, int from, int to) {
  Trainer trainer(config, group);
  EXPECT_EQ(trainer.start_step(), from);
  RunResult r;
  for (int s = from; s < to; ++s) r.losses.push_back(trainer.train_step(s).loss);
  r.params = trainer.engine().gather_all_params();
  return r;
}

// `rest` (resume_steps from step `from`) against the run that never stopped:
// the same bits when tolerance = 0, else losses and parameters within it.
inline void expect_continues(const RunResult& rest, const RunResult& straight, int from,
                             float tolerance) {
  ASSERT_EQ(rest.params.size(), straight.params.size());
  for (size_t i = 0; i < rest.losses.size(); ++i) {
    EXPECT_NEAR(rest.losses[i], straight.losses[from + i], tolerance) << "step " << from + i + 1;
  }
  if (tolerance == 0) {
    EXPECT_EQ(0, std::memcmp(rest.params.data(), straight.params.data(),
                             rest.params.size() * sizeof(float)));
  }
  EXPECT_LE(max_abs_difference(rest.params, straight.params), tolerance);
}

}  // namespace llm
