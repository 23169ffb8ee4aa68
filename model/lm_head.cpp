// The final norm, LM head and cross-entropy (see lm_head.h).
#include "model/lm_head.h"

#include "model/transformer.h"

#include <algorithm>

namespace llm {

int loss_chunk_rows(const ModelConfig& c, int N, int tp, size_t value_bytes, int requested) {
  if (requested > 0) return std::min(requested, N);
  const size_t row_bytes = static_cast<size_t>(c.vocab_size / tp) * value_bytes;
  size_t rows = std::max<size_t>(kAutoLossChunkBytes / row_bytes, 1);
  if (rows >= 64) rows -= rows % 64;  // whole tiles of a GEMM's rows
  return static_cast<int>(std::min<size_t>(rows, static_cast<size_t>(N)));
}

template <class A>
LmHead<A>::LmHead(const Backend& backend, const RankShape& shape, TensorParallelSites<A>& sites,
                  LinearLayers<A>& linear, SharedBuffers<A>& shared, int loss_rows)
    : ops_(backend.ops<A>()),
      shape_(shape),
      sites_(sites),
      linear_(linear),
      shared_(shared),
      loss_rows_(loss_rows),
      vocab_begin_(static_cast<int>(sites.rank() * shape.V)) {}

template <class A>
void LmHead<A>::final_norm(SlotBuffers<A>& slot, const A* stream, const A* gain, int N) {
  sites_.norm_gathered(slot.xf, slot.rstd_f, stream, gain, N);
}

template <class A>
void LmHead<A>::losses(const SlotBuffers<A>& slot, const A* weight, int N) {
  for (int row = 0; row < N; row += loss_rows_)
    chunk(slot, row, std::min(loss_rows_, N - row), weight, 0.0f);
}

template <class A>
void LmHead<A>::backward(const SlotBuffers<A>& slot, const A* stream, const A* gain,
                         float* gain_grad, const A* weight, float* weight_grad, int N) {
  const int tp = shape_.tp, n = N / tp, C = static_cast<int>(shape_.C);
  const int V = static_cast<int>(shape_.V);
  for (int row = 0; row < N; row += loss_rows_) {
    const int rows = std::min(loss_rows_, N - row);
    const size_t first = static_cast<size_t>(row) * C;
    chunk(slot, row, rows, weight, slot.dloss);
    linear_.backward(sites_.dxn() + first, weight_grad, shared_.logits, slot.xf + first, {weight},
                     rows, C, V);
  }
  const A* dxn_rows = sites_.sum_norm_grad_rows(N);
  ops_.fill_zero(sites_.dres(), static_cast<size_t>(n) * C);
  sites_.norm_backward(sites_.final_norm_grad(gain_grad), dxn_rows, stream, gain, slot.rstd_f, N);
  sites_.sum_final_norm_gain(gain_grad);
}

template <class A>
const A* LmHead<A>::row_logits(const SlotBuffers<A>& slot, const A* weight, int row) {
  ops_.matmul_forward(shared_.logits, slot.xf + static_cast<size_t>(row) * shape_.C, weight, 1,
                      static_cast<int>(shape_.C), static_cast<int>(shape_.V));
  return shared_.logits;
}

template <class A>
void LmHead<A>::chunk(const SlotBuffers<A>& slot, int row, int rows, const A* weight, float dloss) {
  const int C = static_cast<int>(shape_.C), V = static_cast<int>(shape_.V), tp = shape_.tp;
  const int32_t* targets = slot.tokens.targets + row;
  ops_.matmul_forward(shared_.logits, slot.xf + static_cast<size_t>(row) * C, weight, rows, C, V);
  float* own = shared_.ce_parts + static_cast<size_t>(sites_.rank()) * rows * 2;
  ops_.cross_entropy_partials(own, shared_.logits, targets, rows, V, vocab_begin_);
  if (tp > 1) {
    sites_.tensor(TensorPayload::loss_parts)
        .all_gather(own, shared_.ce_parts, static_cast<size_t>(rows) * 2, WireType::f32);
  }
  ops_.cross_entropy_combine(shared_.losses + row, dloss != 0 ? shared_.logits : nullptr,
                             shared_.ce_parts, targets, rows, V, vocab_begin_, tp, dloss);
}

template class LmHead<float>;
template class LmHead<Bf16>;

}  // namespace llm
