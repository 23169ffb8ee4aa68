// The activation memory of one pipeline stage, planned once for
// micro-batches up to (max_batch, max_seq) and `in_flight` of them at once:
// the block parts' buffers (block_activations.h), the residual stream, the
// tokens, the head's chunk of logits and the losses, the linear layers' FP8
// codes and the tensor-parallel sites' buffers; and its bytes by role
// (ActivationBytes), for the transformer and the memory planner alike.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/block_part.h"
#include "model/linear_layers.h"
#include "model/tensor_parallel_sites.h"
#include "model/token_uploads.h"

namespace llm {

// What one micro-batch in flight holds (one activation slot) besides its
// blocks' activations (the parts hold those).
template <class A>
struct SlotBuffers {
  A* residual;  // (layers + 1, n, C): [i] the input of the stage's block i, [layers] its output
  SlotTokens tokens;  // its tokens on the device (token_uploads.h)
  // Last stage only (else null):
  A* xf;            // (N, C) final-norm output
  float* rstd_f;    // (n)
  float dloss = 0;  // the stage_forward's dloss: the head's backward forms the loss then
};
// What the slots share.
template <class A>
struct SharedBuffers {
  // Last stage only (else null); R = loss_chunk_rows rows of the head at a time:
  A* logits;        // (R, V) a chunk's logits; become their gradient when training
  float* ce_parts;  // (tp, R, 2) every rank's (log-sum-exp, target logit) per chunk row
  float* losses;    // (N)
  float* rope_cos;  // (T, D / 2)
  float* rope_sin;  // (T, D / 2)
  A* gathered_row;  // (tp * V) one row of logits gathered over the groups (tp or pp > 1, else null)
};

// The pieces of a stage that own activation memory.
template <class A>
struct StagePieces {
  StagePieces(const Backend& backend, const ModelConfig& config, const ParameterLayout& layout,
              const RankShape& shape, Group* tensor, bool fp8);
  std::vector<std::unique_ptr<BlockPart<A>>> parts;  // block.h's, in order
  LinearLayers<A> linear;
  TensorParallelSites<A> sites;
};

template <class A>
struct StageBuffers {
  std::vector<SlotBuffers<A>> slots;
  SharedBuffers<A> shared{};
};

// Plans every buffer of the stage `slice` of `config` (binding `out`, the
// parts, the linear layers and the sites once the plan is bound) and sums
// the bytes by role. `activations` must outlive the binding.
template <class A>
BufferPlan plan_stage(const ModelConfig& config, int B, int T, ModelSlice slice, int in_flight,
                      int loss_rows, StagePieces<A>& pieces, BlockActivations& activations,
                      StageBuffers<A>& out, ActivationBytes& bytes);

}  // namespace llm
