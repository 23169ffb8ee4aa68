// The [training] table: the step loop's keys (config.h's precedence and
// rules apply).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "schema/key_rules.h"
#include "schema/key_types.h"

namespace llm {

// training.loss_chunk_tokens = 0: the LM head's logits at once take at most this.
inline constexpr size_t kAutoLossChunkBytes = size_t{256} << 20;

struct TrainingConfig {
  // What a changed key does on resume, unless the key says otherwise.
  static constexpr OnResume kOnResume = OnResume::changes_trajectory;
  int steps = 100;
  int stop_at_step = 0;
  int batch_size = 8;
  int micro_batch_size = 8;
  int seq_len = 64;
  double lr = 3e-3;
  double min_lr_ratio = 0.1;
  int warmup_steps = 10;
  LrSchedule lr_schedule = LrSchedule::cosine;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;
  double spike_loss_factor = 0.0;
  double spike_grad_norm_factor = 0.0;
  int spike_window = 50;
  int64_t seed = 1337;
  int eval_interval = 50;
  int eval_sequences = 32;
  int sample_tokens = 0;
  Recompute recompute = Recompute::none;
  int recompute_every = 1;
  int loss_chunk_tokens = 0;
  Precision precision = Precision::fp32;
  bool fp8_fast_accum = false;
  Fp8Scaling fp8_scaling = Fp8Scaling::current;
  int fp8_amax_history = 1024;
  Device device = Device::cpu;
  AttentionKernel attention = AttentionKernel::automatic;
  bool gemm_autotune = false;
  bool deterministic = true;
  bool cuda_graphs = false;

  template <class V>
  void visit_fields(V&& v) {
    v("device", device, "cpu | cuda (one GPU per rank, by node-local rank)",
      OnResume::same_trajectory);
    v("attention", attention,
      "GPU attention for bf16: auto (cudnn when built with it) | cudnn (cuDNN fused attention) | "
      "flash (the hand-written kernel); ignored on cpu");
    v("gemm_autotune", gemm_autotune,
      "GPU: time cuBLASLt's top algorithms per GEMM shape and keep the fastest (faster; the bits "
      "may then differ between runs); off: the heuristic's first, the same bits every run");
    v("deterministic", deterministic,
      "GPU: the same bits every run (cuDNN's deterministic attention backward); false: its "
      "fastest backward, which sums with atomics (the bits may differ between runs)");
    v("cuda_graphs", cuda_graphs,
      "GPU: replay the step's kernels between unit boundaries as CUDA graphs, captured on the "
      "second step (fewer launches, the same bits); needs tensor_parallel = 1",
      OnResume::same_trajectory);
    v("steps", steps, "optimizer steps of the whole run (sets the LR schedule)", kNonNegative);
    v("stop_at_step", stop_at_step,
      "stop (and save) after this step, e.g. at a job's time limit (0 = steps)",
      {kNonNegative, OnResume::same_trajectory});
    v("batch_size", batch_size, "global batch in sequences per optimizer step (all ranks together)",
      kPositive);
    v("micro_batch_size", micro_batch_size, "sequences per rank per forward pass",
      {kPositive, OnResume::same_trajectory});
    v("seq_len", seq_len, "tokens per sequence", kPositive);
    v("lr", lr, "peak learning rate", kPositive);
    v("min_lr_ratio", min_lr_ratio, "final learning rate as a fraction of lr", kUnitClosed);
    v("warmup_steps", warmup_steps, "linear warmup steps", kNonNegative);
    v("lr_schedule", lr_schedule, "decay after warmup: cosine | linear | constant");
    v("weight_decay", weight_decay, "AdamW decoupled weight decay (matrices only, not norms)",
      kNonNegative);
    v("beta1", beta1, "AdamW beta1", kUnitHalfOpen);
    v("beta2", beta2, "AdamW beta2", kUnitHalfOpen);
    v("adam_eps", adam_eps, "AdamW epsilon", kPositive);
    v("grad_clip", grad_clip, "clip the global gradient norm to this (0 = off)", kNonNegative);
    v("spike_loss_factor", spike_loss_factor,
      "skip the update of a step whose loss exceeds this multiple of the running median (0 = off)",
      kNonNegative);
    v("spike_grad_norm_factor", spike_grad_norm_factor,
      "skip the update of a step whose gradient norm exceeds this multiple of its running median "
      "(0 = off)",
      kNonNegative);
    v("spike_window", spike_window, "accepted steps in the spike guard's running medians (>= 10)",
      at_least(10));
    v("seed", seed, "seed of initialization and data order");
    v("eval_interval", eval_interval, "steps between validation passes (0 = only at the end)",
      {kNonNegative, OnResume::same_trajectory});
    v("eval_sequences", eval_sequences,
      "validation sequences, the first ones of data.val in file order",
      {kNonNegative, OnResume::same_trajectory});
    v("sample_tokens", sample_tokens, "tokens of text to generate after training (0 = none)",
      {kNonNegative, OnResume::same_trajectory});
    v("recompute", recompute,
      "none | full (keep block inputs, recompute the rest) | selective (keep matmul outputs)",
      OnResume::same_trajectory);
    v("recompute_every", recompute_every, "recompute blocks 0, k, 2k, ... (1 = every block)",
      {at_least(1), OnResume::same_trajectory});
    v("loss_chunk_tokens", loss_chunk_tokens,
      "tokens whose LM-head logits exist at once: the head, the loss and its gradient run a chunk "
      "of a micro-batch's tokens at a time (0 = as many as fit in 256 MiB of logits)",
      kNonNegative);
    v("precision", precision,
      "fp32 | bf16 (bf16 compute and activations, fp32 master weights) | fp8 (bf16, with the "
      "block matmuls on FP8 copies: e4m3 weights and activations, e5m2 gradients)");
    v("fp8_fast_accum", fp8_fast_accum,
      "precision fp8 on a GPU: the forward's FP8 GEMMs sum in the tensor cores' fast, narrower "
      "accumulator, as Transformer Engine does; the backward's always promote to fp32 (the CPU "
      "sums in fp32 either way)");
    v("fp8_scaling", fp8_scaling,
      "precision fp8: current (each forward input scaled by its own amax) | delayed (the block "
      "matmuls' forward inputs scaled by the largest amax of the last fp8_amax_history steps, "
      "the cast fused into RMSNorm and SwiGLU)");
    v("fp8_amax_history", fp8_amax_history,
      "fp8_scaling = delayed: optimizer steps of amaxes a forward input's scale is the maximum of",
      kPositive);
  }
};

}  // namespace llm
