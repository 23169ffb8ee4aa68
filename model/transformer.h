// The Llama-family decoder written as if for one device: embedding, L blocks
// of (RMSNorm, fused qkv, RoPE, causal GQA attention, output projection,
// residual, RMSNorm, fused gate/up, SwiGLU, down projection, residual), final
// RMSNorm, LM head (optionally tied), cross-entropy.
// It owns only activations; parameters and gradients come unit by unit from a
// UnitProvider, which is how sharding engines plug in.
// Invariant: every activation buffer is allocated once, at construction, for
// micro-batches up to (max_batch, max_seq); no allocation happens per step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/arena.h"
#include "core/config.h"
#include "model/backend.h"
#include "model/layout.h"
#include "model/unit_provider.h"

namespace llm {

class Transformer {
 public:
  Transformer(const ModelConfig& config, int max_batch, int max_seq, const Backend& backend);

  // Bytes of activation and scratch buffers for micro-batches of (B, T),
  // computed without allocating anything.
  static size_t activation_bytes(const ModelConfig& config, int B, int T);

  const ModelConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  size_t activation_bytes() const { return arena_.capacity(); }

  // Forward of B sequences of T tokens (inputs (B, T)). Returns the mean
  // cross-entropy against targets (B, T); with targets == nullptr returns 0
  // and leaves the logits (B, T, V) readable through logits().
  float forward(UnitProvider& units, const int32_t* inputs, const int32_t* targets, int B, int T);
  const float* logits() const { return acts_.logits; }

  // Forward and backward of one micro-batch. Each unit's gradient receives
  // (+=) d(dloss * sum of per-token losses)/d(params), so dloss = 1/(tokens of
  // the global batch) makes a sum over micro-batches and ranks the mean
  // gradient. Returns the micro-batch's mean loss.
  float forward_backward(UnitProvider& units, const int32_t* inputs, const int32_t* targets, int B,
                         int T, float dloss);

 private:
  // Offsets of a block's tensors within its unit (the same for every block).
  struct BlockOffsets {
    size_t attn_norm, wqkv, wo, mlp_norm, w13, w2;
  };
  struct Activations {
    float* residual;  // (L + 1, N, C): [l] is the input of block l, [L] the last output
    float* xn1;       // (L, N, C) attention-norm output
    float* rstd1;     // (L, N)
    float* qkv;       // (L, N, QKV) with RoPE applied to q and k
    float* att;       // (L, N, H * D) attention output before the projection
    float* lse;       // (L, B, H, T) softmax log-sum-exp per query
    float* x_mid;     // (L, N, C) residual stream after attention
    float* xn2;       // (L, N, C) MLP-norm output
    float* rstd2;     // (L, N)
    float* h13;       // (L, N, 2F) [gate | up]
    float* g;         // (L, N, F) silu(gate) * up
    float* xf;        // (N, C) final-norm output
    float* rstd_f;    // (N)
    float* logits;    // (N, V); becomes dlogits in forward_backward
    float* losses;    // (N)
    float* rope_cos;  // (T, D / 2)
    float* rope_sin;  // (T, D / 2)
    // backward scratch, reused by every block
    float* dres;      // (N, C) gradient of the residual stream
    float* dxn;       // (N, C) gradient of a norm output
    float* dqkv;      // (N, QKV)
    float* datt;      // (N, H * D)
    float* dh13;      // (N, 2F)
    float* dg;        // (N, F)
  };

  static BufferPlan plan_activations(const ModelConfig& config, int B, int T, Activations& acts);
  void forward_blocks(UnitProvider& units, const int32_t* inputs, int B, int T);
  const float* head_weight(UnitProvider& units, const float* head_params, Pass pass);
  void release_head_weight(UnitProvider& units, Pass pass);
  float mean_loss(int N) const;

  ModelConfig config_;
  ParameterLayout layout_;
  const Backend& be_;
  int max_batch_, max_seq_;
  int C_, H_, KV_, D_, F_, V_, L_, QKV_;
  BlockOffsets block_;
  Activations acts_{};
  Arena arena_;
  int rope_T_ = 0;  // sequence length the RoPE tables were computed for
};

}  // namespace llm
