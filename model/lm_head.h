// The last stage's end of the model: the final norm, the LM head's logits a
// chunk of rows at a time (loss_chunk_rows), the cross-entropy of every
// token and, in training, their gradient through the head and the final
// norm into the residual stream's (docs/memory.md, "The logits in chunks").
// Under tensor parallelism each rank holds a vocabulary slice, and the
// cross-entropy combines every rank's (log-sum-exp, target logit) pairs, so
// no rank holds full logits.
#pragma once

#include <cstdint>
#include <vector>

#include "model/stage_buffers.h"

namespace llm {

template <class A>
class LmHead {
 public:
  LmHead(const Backend& backend, const RankShape& shape, TensorParallelSites<A>& sites,
         LinearLayers<A>& linear, SharedBuffers<A>& shared, int loss_rows);

  // slot.xf (N, C) = the final norm of `stream` (this rank's rows), gain `gain`.
  void final_norm(SlotBuffers<A>& slot, const A* stream, const A* gain, int N);
  // The losses of every row (evaluation) into shared.losses.
  void losses(const SlotBuffers<A>& slot, const A* weight, int N);
  // Training: the losses, and from them, scaled by slot.dloss, the head's
  // weight gradient (+= into weight_grad), the final norm's (into
  // gain_grad) and the residual stream's (into the sites' dres).
  void backward(const SlotBuffers<A>& slot, const A* stream, const A* gain, float* gain_grad,
                const A* weight, float* weight_grad, int N);
  // Row `row`'s logits, this rank's vocabulary slice, into shared.logits.
  const A* row_logits(const SlotBuffers<A>& slot, const A* weight, int row);

 private:
  // Rows [row, row + rows) of the head: their logits into shared.logits,
  // then per row the (log-sum-exp, target logit) of every rank and the
  // losses; with dloss != 0 the logits become their gradient.
  void chunk(const SlotBuffers<A>& slot, int row, int rows, const A* weight, float dloss);

  const TypedOps<A>& ops_;
  const RankShape& shape_;
  TensorParallelSites<A>& sites_;
  LinearLayers<A>& linear_;
  SharedBuffers<A>& shared_;
  int loss_rows_;
  int vocab_begin_;  // first vocabulary row of this rank's slice
};

}  // namespace llm
