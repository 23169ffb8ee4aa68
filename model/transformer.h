// The Llama-family decoder written as if for one device: embedding, L blocks
// of (RMSNorm, fused qkv, RoPE, causal GQA attention, output projection,
// residual, RMSNorm, fused gate/up, SwiGLU, down projection, residual), final
// RMSNorm, LM head (optionally tied), cross-entropy.
// It owns only activations; parameters and gradients come unit by unit from a
// UnitProvider, which is how sharding engines plug in.
// Activation checkpointing: a checkpointed block keeps only what its mode
// says (full: its input, which is the residual stream; selective: the matmul
// and attention outputs) and recomputes the rest in backward from the unit
// acquired for backward, with the same kernels in the same order, so
// gradients are bit-identical to a run without checkpointing.
// Invariant: every activation buffer is allocated once, at construction, for
// micro-batches up to (max_batch, max_seq); no allocation happens per step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/config.h"
#include "model/backend.h"
#include "model/layout.h"
#include "model/unit_provider.h"

namespace llm {

enum class Recompute { none, selective, full };

struct CheckpointingPlan {
  Recompute mode = Recompute::none;
  int every = 1;  // blocks l with l % every == 0 are checkpointed
  bool checkpointed(int layer) const { return mode != Recompute::none && layer % every == 0; }
};
CheckpointingPlan checkpointing_plan(const TrainingConfig& training);

// Activation memory of one configuration, computed without allocating.
struct ActivationBytes {
  size_t per_block_kept = 0;  // what one non-checkpointed block keeps
  size_t per_block_checkpointed = 0;  // what one checkpointed block keeps (beyond its input)
  size_t residual_stream = 0;  // the L + 1 block inputs / outputs
  size_t recompute_scratch = 0;  // one block's worth, shared by checkpointed blocks
  size_t head_and_loss = 0;  // final norm, logits (N x V), losses, RoPE tables
  size_t backward_scratch = 0;  // gradient buffers reused by every block
  size_t total = 0;
};

class Transformer {
 public:
  Transformer(const ModelConfig& config, int max_batch, int max_seq, const Backend& backend,
              CheckpointingPlan checkpointing = {});

  static ActivationBytes activation_bytes(const ModelConfig& config, int B, int T,
                                          CheckpointingPlan checkpointing = {});

  const ModelConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  const ActivationBytes& activation_bytes() const { return bytes_; }

  // Forward of B sequences of T tokens (inputs (B, T)). Returns the mean
  // cross-entropy against targets (B, T); with targets == nullptr returns 0
  // and leaves the logits (B, T, V) readable through logits().
  float forward(UnitProvider& units, const int32_t* inputs, const int32_t* targets, int B, int T);
  const float* logits() const { return buf_.head.logits; }

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
  // One block's activations; for checkpointed blocks some point into the
  // shared recompute scratch.
  struct BlockBuffers {
    float* xn1;    // (N, C) attention-norm output
    float* rstd1;  // (N)
    float* qkv;    // (N, QKV) with RoPE applied to q and k
    float* att;    // (N, H * D) attention output before the projection
    float* lse;    // (B, H, T) softmax log-sum-exp per query
    float* x_mid;  // (N, C) residual stream after attention
    float* xn2;    // (N, C) MLP-norm output
    float* rstd2;  // (N)
    float* h13;    // (N, 2F) [gate | up]
    float* g;      // (N, F) silu(gate) * up
  };
  struct HeadBuffers {
    float* residual;  // (L + 1, N, C): [l] is the input of block l, [L] the last output
    float* xf;        // (N, C) final-norm output
    float* rstd_f;    // (N)
    float* logits;    // (N, V); becomes dlogits in forward_backward
    float* losses;    // (N)
    float* rope_cos;  // (T, D / 2)
    float* rope_sin;  // (T, D / 2)
  };
  struct GradBuffers {  // backward scratch, reused by every block
    float* dres;  // (N, C) gradient of the residual stream
    float* dxn;   // (N, C) gradient of a norm output
    float* dqkv;  // (N, QKV)
    float* datt;  // (N, H * D)
    float* dh13;  // (N, 2F)
    float* dg;    // (N, F)
  };
  struct Buffers {
    std::vector<BlockBuffers> blocks;
    BlockBuffers scratch;
    HeadBuffers head;
    GradBuffers grads;
  };

  // Lists every buffer (binding `out`'s slots) and sums the bytes by role.
  static BufferPlan plan_activations(const ModelConfig& config, int B, int T,
                                     CheckpointingPlan checkpointing, Buffers& out,
                                     ActivationBytes& bytes);
  void forward_blocks(UnitProvider& units, const int32_t* inputs, int B, int T);
  // Block l's forward into its buffers; with write_output false it stops
  // after SwiGLU (what backward recomputation needs).
  void block_forward(int l, const float* p, int B, int T, bool write_output);
  void recompute_block(int l, const float* p, int B, int T);
  void block_backward(int l, const float* p, float* grads, int B, int T);
  float* residual(int l) const;
  const float* head_weight(UnitProvider& units, const float* head_params, Pass pass);
  void release_head_weight(UnitProvider& units, Pass pass);
  float mean_loss(int N) const;

  ModelConfig config_;
  ParameterLayout layout_;
  const Backend& be_;
  int max_batch_, max_seq_;
  int C_, H_, KV_, D_, F_, V_, L_, QKV_;
  CheckpointingPlan checkpointing_;
  BlockOffsets block_;
  Buffers buf_;
  ActivationBytes bytes_;
  Arena arena_;
};

}  // namespace llm
