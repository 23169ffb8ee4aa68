// What the op-profile suites share (test_op_profile.cpp on the CPU,
// gpu_test_op_profile.cpp on CUDA): training steps of the tiny config on a
// profiled backend (model/op_profile.h), the calls per step every op must
// have, derived from the model's structure and the config independently of
// the profile, and the checks of calls, times and losses.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "model/op_profile.h"
#include "parallel/comm.h"
#include "model/flops.h"
#include "trainer/trainer.h"

namespace llm::test_support {

// The tiny config on one rank, ddp, without recomputation: each step runs
// the model's forward and backward once per micro-batch, then the engine's
// per-unit and per-tensor work.
inline Config op_profile_config(std::vector<std::string> overrides) {
  overrides.push_back("checkpoint.dir=" +
                      (std::filesystem::temp_directory_path() / "llm_test_op_profile").string());
  overrides.push_back("logging.metrics=false");
  overrides.push_back("checkpoint.resume=none");
  overrides.push_back("parallel.mode=ddp");
  overrides.push_back("training.recompute=none");
  return config_load("configs/tiny.toml", overrides);
}

// Calls per optimizer step of every op, for op_profile_config's setup with
// M micro-batches per step, from the model as model/transformer.h describes
// it and from the engine's work per unit and tensor of `layout`.
inline std::map<std::string, int64_t> expected_calls_per_step(const Config& config,
                                                              const ParameterLayout& layout,
                                                              int64_t M) {
  const int64_t L = config.model.n_layers;
  const std::string s = config.precision() == Precision::bf16 ? "<bf16>" : "<f32>";
  std::map<std::string, int64_t> calls;
  auto add = [&](const std::string& op, int64_t n) { calls[op] += n; };
  // Forward of a micro-batch: the embedding; per block two norms (attention,
  // MLP), the qkv and gate/up matmuls, RoPE, attention, SwiGLU, and the output
  // and down projections added into the residual stream; the final norm and
  // the LM head; the loss as per-row partials and their combination.
  add("embedding_forward" + s, M);
  add("rmsnorm_forward" + s, M * (2 * L + 1));
  add("matmul_forward" + s, M * (2 * L + 1));
  add("rope_forward" + s, M * L);
  add("attention_forward" + s, M * L);
  add("swiglu_forward" + s, M * L);
  add("matmul_forward_residual" + s, M * 2 * L);
  add("cross_entropy_partials" + s, M);
  add("cross_entropy_combine" + s, M);
  // Backward: the LM head's matmul, the residual gradient zeroed, the final
  // norm; per block the four matmuls, SwiGLU, attention, RoPE and two norms;
  // the embedding.
  add("matmul_backward" + s, M * (4 * L + 1));
  add("fill_zero" + s, M);
  add("rmsnorm_backward" + s, M * (2 * L + 1));
  add("swiglu_backward" + s, M * L);
  add("attention_backward" + s, M * L);
  add("rope_backward" + s, M * L);
  add("embedding_backward" + s, M);
  // The engine (ddp: this rank owns every unit whole): each unit's fp32
  // gradient zeroed at the step's start and its squares summed for the norm,
  // AdamW once per tensor (its weight decay is per tensor).
  add("fill_zero<f32>", static_cast<int64_t>(layout.units.size()));
  add("sum_squares", static_cast<int64_t>(layout.units.size()));
  add("adamw_update", static_cast<int64_t>(layout.tensors.size()));
  return calls;
}

struct ProfiledSteps {
  std::vector<float> losses;
  std::map<std::string, int64_t> calls_per_step;  // by op, from the profile
  std::map<std::string, int64_t> expected_calls;  // by op, expected_calls_per_step
  double matmul_flops_per_step = 0;               // the profile's matmul FLOPs
  double op_seconds = 0, step_seconds = 0;        // the profile's sums
  double wall_seconds = 0;                        // the host clock around the steps
};

// `steps` steps of `config` on its device's backend, wrapped by profiled().
inline ProfiledSteps run_profiled_steps(const Config& config, int steps) {
  OpProfile profile(config.device());
  const Backend backend =
      profiled(backend_for(config.device(), config.training.attention), profile);
  Trainer trainer(config, comm_world(), &backend);
  ProfiledSteps run;
  run.expected_calls =
      expected_calls_per_step(config, trainer.model().layout(), trainer.accumulation_steps());
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    profile.begin_step();
    run.losses.push_back(trainer.train_step(s).loss);
    profile.end_step();
  }
  run.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(profile.steps(), steps);
  for (const OpTotal& op : profile.totals()) {
    EXPECT_EQ(op.calls % steps, 0) << op.name << ": steps differ in their calls";
    run.calls_per_step[op.name] = op.calls / steps;
    run.matmul_flops_per_step += op.flops / steps;
    EXPECT_EQ(op.flops > 0, op.name.rfind("matmul_", 0) == 0) << op.name;
  }
  run.op_seconds = profile.op_seconds();
  run.step_seconds = profile.step_seconds();
  return run;
}

// The same steps on the unwrapped backend.
inline std::vector<float> plain_losses(const Config& config, int steps) {
  Trainer trainer(config, comm_world());
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) losses.push_back(trainer.train_step(s).loss);
  return losses;
}

// Every op the step calls, each as often as the model says, no other op,
// and the matmuls' FLOPs as model/flops.h counts them (6 x matmul parameters
// x tokens: forward, and backward's two products).
inline void expect_calls_follow_the_model(const Config& config, const ProfiledSteps& run) {
  EXPECT_EQ(run.calls_per_step, run.expected_calls);
  EXPECT_DOUBLE_EQ(run.matmul_flops_per_step, step_flops(config).matmul);
}

// The ops' times lie within the steps' host time, which lies within the
// wall time around them, and add up to nearly all of it: the rest is each
// step's tail after its last op (a return from train_step) and the host's
// latency at its start and end. 10% leaves room for a busy 2-core machine
// running tests side by side.
inline void expect_op_times_add_up(const ProfiledSteps& run) {
  EXPECT_GT(run.op_seconds, 0);
  EXPECT_LE(run.op_seconds, run.step_seconds);
  EXPECT_LE(run.step_seconds, run.wall_seconds);
  EXPECT_GE(run.op_seconds, 0.9 * run.wall_seconds);
}

}  // namespace llm::test_support
