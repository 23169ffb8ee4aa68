// The training step written out by hand, to check the real Trainer against:
// the same sequences read from the shard by the test itself, the gradient of
// the naive double model (test/naive_model.h, central differences), and the
// schedule, the global-norm clip, the weight-decay mask and AdamW with
// t = step + 1 as docs/offload.md and the AdamW paper state them, none of them
// taken from model/ or trainer/. A bug shared by every parallel mode (the
// optimizer, the clip, the data position, the loss scale) moves the Trainer
// away from this loop, where a mode-against-mode test would not see it.
// check_trainer_against_reference() runs it at any world size (every rank
// calls it together).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <string>
#include <vector>

#include "schema/config.h"
#include "data/loader.h"
#include "parallel/comm.h"
#include "test/naive_model.h"
#include "trainer/trainer.h"

namespace llm::reference_training {

using naive::NamedParams;
using reference::Vec;

// A model small enough for a finite-difference gradient of every parameter
// at every step (1,208 parameters), with grouped-query attention (4 query
// heads over 2 kv heads), an untied head, and a vocabulary of 13.
// The schedule's four steps cover warmup (step 0 at lr / warmup), the peak,
// the middle of the cosine and its floor; grad_clip sits below the gradient
// norm, so every step is clipped; weight decay is large enough to matter.
inline const char* kModelToml = R"(
[model]
dim = 8
n_layers = 2
n_heads = 4
n_kv_heads = 2
ffn_dim = 12
vocab_size = 13
tie_embeddings = false
init_std = 0.3

[training]
steps = 4
warmup_steps = 1
batch_size = 12
micro_batch_size = 1
seq_len = 6
lr = 1e-2
min_lr_ratio = 0.1
weight_decay = 0.2
beta1 = 0.9
beta2 = 0.95
adam_eps = 1e-6
grad_clip = 0.05
eval_interval = 0
eval_sequences = 0
seed = 11

[logging]
metrics = false

[checkpoint]
resume = "none"
)";

// Writes tokens in llm.c's uint16 shard layout, by hand: a 256 x int32 header
// (magic 20240520, version 1, token count), then the tokens.
inline void write_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  int32_t header[256] = {20240520, 1, static_cast<int32_t>(tokens.size())};
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(header, sizeof(header), 1, f);
  std::fwrite(tokens.data(), sizeof(uint16_t), tokens.size(), f);
  ASSERT_EQ(std::fclose(f), 0) << path;
}

// 40 sequences of the config above, tokens from a fixed pseudo-random
// sequence (so every step sees other sequences).
inline std::vector<uint16_t> reference_tokens() {
  std::vector<uint16_t> tokens(40 * 6 + 1);
  uint32_t state = 12345;
  for (uint16_t& t : tokens) {
    state = state * 1664525u + 1013904223u;
    t = static_cast<uint16_t>((state >> 16) % 13);
  }
  return tokens;
}
inline void write_reference_shard(const std::string& path) {
  write_shard(path, reference_tokens());
}

// The loss mask of the masked reference: a token is a target unless its
// value is a multiple of 3 (about a third are dropped, unevenly over the
// sequences, so micro-batches and ranks keep different counts).
inline bool kept_by_rule(int32_t token) { return token % 3 != 0; }

// Where the masked reference keeps its shard without the mask, for the
// hand-written loop to read the raw targets from.
inline std::string unmasked_copy(const std::string& shard) { return shard + ".unmasked"; }

// The reference shard at `path` with a loss mask beside it (path + ".mask",
// written by hand: a 256 x int32 header of magic 20261126, version 1 and the
// token count, then one byte per token, 1 = kept_by_rule), and its copy
// without a mask at unmasked_copy(path).
inline void write_masked_reference_shard(const std::string& path) {
  const std::vector<uint16_t> tokens = reference_tokens();
  write_shard(path, tokens);
  write_shard(unmasked_copy(path), tokens);
  int32_t header[256] = {20261126, 1, static_cast<int32_t>(tokens.size())};
  std::vector<uint8_t> kept;
  for (uint16_t t : tokens) kept.push_back(kept_by_rule(t) ? 1 : 0);
  std::FILE* f = std::fopen((path + ".mask").c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(header, sizeof(header), 1, f);
  std::fwrite(kept.data(), 1, kept.size(), f);
  ASSERT_EQ(std::fclose(f), 0) << path;
}

// Learning rate of 0-based step s: linear warmup reaching lr at step
// warmup - 1, then half a cosine from lr (step warmup) to lr * min_lr_ratio
// (the last step).
inline double expected_lr(const TrainingConfig& t, int s) {
  if (s < t.warmup_steps) return t.lr * (s + 1) / t.warmup_steps;
  const double progress = double(s - t.warmup_steps) / (t.steps - t.warmup_steps - 1);
  const double floor = t.lr * t.min_lr_ratio;
  return floor + (t.lr - floor) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

// Matrices (the embedding, the projections, the head) decay; the RMSNorm
// gains (every name ending in "norm.weight") do not.
inline bool decays(const std::string& name) {
  const std::string gain = "norm.weight";
  return name.size() < gain.size() ||
         name.compare(name.size() - gain.size(), gain.size(), gain) != 0;
}

// One AdamW update of one element at 1-based step t: decoupled weight decay
// p *= 1 - lr * wd, then the bias-corrected step with gradient g.
inline void adamw_element(const TrainingConfig& c, double& p, double& m, double& v, double g,
                          double lr, double wd, int t) {
  m = c.beta1 * m + (1 - c.beta1) * g;
  v = c.beta2 * v + (1 - c.beta2) * g * g;
  const double m_hat = m / (1 - std::pow(c.beta1, t));
  const double v_hat = v / (1 - std::pow(c.beta2, t));
  p *= 1 - lr * wd;
  p -= lr * m_hat / (std::sqrt(v_hat) + c.adam_eps);
}

// AdamW of the hand-written loop: the gradients scaled by `clip` first.
// `visible()` is what the next forward computes with, `masters()` what the
// engine holds; plain AdamW updates both at once.
struct AdamW {
  NamedParams params, m, v;

  void start(const NamedParams& initial) { params = initial; }
  const NamedParams& visible() const { return params; }
  const NamedParams& masters() const { return params; }
  void step(const TrainingConfig& c, const NamedParams& grads, double lr, double clip, int t) {
    for (auto& [name, p] : params) {
      Vec& m_ = m[name];
      Vec& v_ = v[name];
      m_.resize(p.size(), 0.0);
      v_.resize(p.size(), 0.0);
      const Vec& g = grads.at(name);
      const double wd = decays(name) ? c.weight_decay : 0.0;
      for (size_t i = 0; i < p.size(); ++i)
        adamw_element(c, p[i], m_[i], v_[i], g[i] * clip, lr, wd, t);
    }
  }
};

// offload.delayed_update written out: step t's update reaches the masters at
// once, but the forward and backward of step t + 1 still compute with the
// parameters from before it (they are uploaded at step t + 1's optimizer
// phase), so each step's gradient is taken one update behind.
struct DelayedAdamW : AdamW {
  NamedParams seen;

  void start(const NamedParams& initial) {
    AdamW::start(initial);
    seen = initial;
  }
  const NamedParams& visible() const { return seen; }
  void step(const TrainingConfig& c, const NamedParams& grads, double lr, double clip, int t) {
    seen = params;
    AdamW::step(c, grads, lr, clip, t);
  }
};

inline double global_norm(const NamedParams& grads) {
  double sum = 0;
  for (const auto& [name, g] : grads)
    for (double x : g) sum += x * x;
  return std::sqrt(sum);
}

// Tolerances. The Trainer is fp32 against a double loop. Measured over the
// four steps (one process, 2-core AMD EPYC): loss within 4e-8 relative,
// gradient norm within 1.2e-7 relative, parameters within 1.1e-6 absolute
// (clipping scales the gradients to ~1e-3 rms, many elements far smaller,
// where fp32 gradient noise shows through AdamW's eps of 1e-6). The bounds
// leave ~10x margin, and sit far below what a wrong formula moves: a bias
// correction off by one step moves every first update by ~2.7e-3 (0.27 lr),
// decaying a norm gain moves it by lr * wd = 2e-3, skipping the clip or the
// warmup moves parameters by up to lr.
constexpr double kLossRel = 1e-6, kNormRel = 2e-6, kLrRel = 1e-6, kParamAbs = 1e-5;

// naive::gradient with its finite differences shared out: rank r of P
// computes the entries i with i % P == r, and an all-gather (a copy of their
// bytes, sent as pairs of f32 words) gives every rank all of them, so every
// rank holds the single process's values at 1/P of the cost.
inline NamedParams shared_gradient(Group& world, const ModelConfig& m, const NamedParams& p,
                                   const std::vector<int32_t>& inputs,
                                   const std::vector<int32_t>& targets, int B, int T) {
  const int P = world.size(), r = world.rank();
  NamedParams grads = naive::gradient(m, p, inputs, targets, B, T, 1e-5, {}, {r, P});
  if (P == 1) return grads;
  size_t total = 0;
  for (const auto& [name, values] : grads) total += values.size();
  const size_t per_rank = (total + P - 1) / P;
  std::vector<double> mine(per_rank, 0.0), all(per_rank * P);
  static_assert(sizeof(double) == 2 * sizeof(float));
  size_t index = 0;
  for (const auto& [name, values] : grads) {
    for (double value : values) {
      if (static_cast<int>(index % P) == r) mine[index / P] = value;
      ++index;
    }
  }
  world.all_gather_async(mine.data(), all.data(), 2 * per_rank, WireType::f32).wait();
  index = 0;
  for (auto& [name, values] : grads) {
    for (double& value : values) {
      value = all[(index % P) * per_rank + index / P];
      ++index;
    }
  }
  return grads;
}

// Trains config (kModelToml plus `overrides`) with the real Trainer over
// `world`, and the hand-written loop beside it with `optimizer` (AdamW, or
// another reference with the same interface); compares the loss, gradient
// norm and learning rate of every step and every parameter after it. With
// `masked` (a shard of write_masked_reference_shard), the loop reads the
// unmasked copy and drops the targets kept_by_rule drops itself: the loss is
// the mean over the global batch's kept targets.
template <class Optimizer>
inline void check_trainer_against_reference(Group& world, const std::string& shard,
                                            const std::vector<std::string>& overrides,
                                            Optimizer& optimizer, bool masked = false) {
  std::vector<std::string> all = {"data.train=" + shard};
  all.insert(all.end(), overrides.begin(), overrides.end());
  Config config = config_parse(kModelToml, "reference_training", all);
  const TrainingConfig& t = config.training;
  const int B = t.batch_size, T = t.seq_len;
  Trainer trainer(config, world);
  NamedParams initial = naive::named_params(trainer.model().layout(), trainer.engine());
  ASSERT_EQ(initial.size(), trainer.model().layout().tensors.size());
  optimizer.start(initial);
  DataLoader loader(masked ? unmasked_copy(shard) : shard, T, config.model.vocab_size,
                    static_cast<uint64_t>(t.seed), /*shuffle=*/true);
  ASSERT_FALSE(loader.drops_targets());
  int clipped = 0;
  for (int s = 0; s < t.steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const StepResult result = trainer.train_step(s);

    // Step s trains on stream positions [s * B, (s + 1) * B), whatever the
    // world size and micro-batch size.
    std::vector<int32_t> inputs(B * T), targets(B * T);
    loader.read(static_cast<int64_t>(s) * B, B, inputs.data(), targets.data());
    int kept = 0;
    for (int32_t& target : targets) {
      if (masked && !kept_by_rule(target)) target = -1;
      kept += target >= 0;
    }
    EXPECT_EQ(result.kept_targets, kept);
    if (masked) {
      EXPECT_LT(kept, B * T) << "the mask must drop some targets of every step";
    }
    const NamedParams& params = optimizer.visible();
    const double loss = naive::loss(config.model, params, inputs, targets, B, T);
    const NamedParams grads = shared_gradient(world, config.model, params, inputs, targets, B, T);
    const double norm = global_norm(grads);
    const double lr = expected_lr(t, s);
    EXPECT_NEAR(result.loss, loss, kLossRel * loss);
    EXPECT_NEAR(result.grad_norm, norm, kNormRel * norm);
    EXPECT_NEAR(result.lr, lr, kLrRel * lr);
    EXPECT_FALSE(result.skipped.has_value());

    const double clip = norm > t.grad_clip ? t.grad_clip / norm : 1.0;
    clipped += clip < 1.0;
    optimizer.step(t, grads, lr, clip, s + 1);

    const NamedParams trained = naive::named_params(trainer.model().layout(), trainer.engine());
    double worst = 0;
    std::string worst_at;
    for (const auto& [name, expected] : optimizer.masters()) {
      const Vec& actual = trained.at(name);
      for (size_t i = 0; i < expected.size(); ++i) {
        const double d = std::abs(actual[i] - expected[i]);
        if (d > worst) worst = d, worst_at = name + "[" + std::to_string(i) + "]";
      }
    }
    EXPECT_LE(worst, kParamAbs) << "largest parameter difference at " << worst_at;
  }
  EXPECT_EQ(clipped, t.steps) << "grad_clip must bind at every step for the clip to be tested";
}

inline void check_trainer_against_reference(Group& world, const std::string& shard,
                                            const std::vector<std::string>& overrides,
                                            bool masked = false) {
  AdamW adamw;
  check_trainer_against_reference(world, shard, overrides, adamw, masked);
}

}  // namespace llm::reference_training
