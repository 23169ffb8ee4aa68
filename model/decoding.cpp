// Incremental decoding (generation) and sampling's logits: the key/value
// cache, a stage's forward of new tokens at their positions, and one row's
// logits gathered to every rank.
#include "model/transformer_stage.h"

namespace llm {

template <class A>
void TransformerStage<A>::reserve_kv_cache(int batch, int capacity) {
  if (!kv_cache_.empty() && batch <= kv_batch_ && capacity <= kv_capacity_) return;
  LLM_CHECK(kv_cache_.empty(), "transformer: the key/value cache is already reserved for ({}, {})",
            kv_batch_, kv_capacity_);
  LLM_CHECK(batch >= 1 && batch <= max_batch_ && capacity >= 1 && capacity <= max_seq_,
            "transformer: a key/value cache of ({}, {}) exceeds the activation buffers ({}, {})",
            batch, capacity, max_batch_, max_seq_);
  const size_t per_block = static_cast<size_t>(batch) * capacity * 2 * s_.KV * s_.D;
  BufferPlan plan;
  kv_cache_.resize(layers_.count());
  for (A*& cache : kv_cache_) plan.add(cache, per_block);
  kv_arena_ = Arena("kv cache", plan.bytes(), memory_);
  plan.bind(kv_arena_);
  kv_batch_ = batch;
  kv_capacity_ = capacity;
}

template <class A>
void TransformerStage<A>::decode_stage(UnitProvider& units, const int32_t* inputs, int B, int T,
                                       int start) {
  LLM_CHECK(!kv_cache_.empty() || layers_.count() == 0,
            "transformer: decode needs reserve_kv_cache first");
  LLM_CHECK(
      B <= kv_batch_ && start >= 0 && start + T <= kv_capacity_,
      "transformer: decoding {} x {} tokens at position {} exceeds the key/value cache ({}, {})", B,
      T, start, kv_batch_, kv_capacity_);
  slot_ = &buf_.slots[0];
  upload_micro_batch(inputs, nullptr, B, T);
  decode_start_ = start;
  forward_blocks(units, B, T, /*loss=*/false);
  decode_start_ = -1;
}

template <class A>
void TransformerStage<A>::logits_row(UnitProvider& units, int row, float* out) {
  const SharedBuffers<A>& h = buf_.shared;
  const WireType wire = TensorParallelSites<A>::wire_type();
  const A* logits = nullptr;
  if (last_) {  // the row's logits from its final-norm output, into the chunk buffer
    const int head = layout_.head_unit();
    logits = head_.row_logits(
        *slot_, head_weight(units, params(units, head, Pass::forward), Pass::forward), row);
    release_head_weight(units, Pass::forward);
    units.release_params(head, Pass::forward);
  }
  if (tp_ > 1 && last_) {  // every rank's vocabulary slice, in rank (= vocabulary) order
    pieces_.sites.tensor(TensorPayload::logits_row).all_gather(logits, h.gathered_row, s_.V, wire);
    logits = h.gathered_row;
  }
  if (pipeline_ && pipeline_->size() > 1) {  // the last stage's row, to every stage
    if (logits != h.gathered_row) {
      if (last_) memory_.copy(h.gathered_row, logits, host_row_.size() * sizeof(A));
      logits = h.gathered_row;
    }
    pipeline_->broadcast(h.gathered_row, host_row_.size(), wire, pipeline_->size() - 1);
  }
  memory_.to_host(host_row_.data(), logits, host_row_.size() * sizeof(A));
  uploads_.device_passed();  // to_host waited for the device
  for (size_t v = 0; v < host_row_.size(); ++v) out[v] = to_float(host_row_[v]);
}

#define LLM_DECODING(A)                                                                          \
  template void TransformerStage<A>::reserve_kv_cache(int, int);                                 \
  template void TransformerStage<A>::decode_stage(UnitProvider&, const int32_t*, int, int, int); \
  template void TransformerStage<A>::logits_row(UnitProvider&, int, float*);
LLM_DECODING(float)
LLM_DECODING(Bf16)
#undef LLM_DECODING

}  // namespace llm
