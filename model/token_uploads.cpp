// A micro-batch's tokens to the device (see token_uploads.h).
#include "model/token_uploads.h"

#include <algorithm>

#include "base/error.h"

namespace llm {

TokenUploads::TokenUploads(const DeviceMemory& memory, int max_batch, int max_seq)
    : memory_(memory), max_tokens_(static_cast<size_t>(max_batch) * max_seq) {
  staging_ = {static_cast<int32_t*>(memory_.allocate_staging(4 * max_tokens_ * sizeof(int32_t))),
              memory_.release_staging};
}

void TokenUploads::set_document_masking(DocumentBoundary boundary, bool reset_positions,
                                        const std::vector<SlotTokens*>& slots) {
  LLM_CHECK(boundary.token >= 0 && documents_.token < 0,
            "transformer: document masking needs a boundary token >= 0, once (got {})",
            boundary.token);
  BufferPlan plan;
  for (SlotTokens* slot : slots) {
    plan.add(slot->doc_start, max_tokens_);
    if (reset_positions) plan.add(slot->positions, max_tokens_);
  }
  arena_ = Arena("document masks", plan.bytes(), memory_);
  plan.bind(arena_);
  documents_ = boundary;
}

void TokenUploads::upload(SlotTokens& slot, const int32_t* inputs, const int32_t* targets, int B,
                          int T, bool first_stage, bool last_stage) {
  if (in_flight_) memory_.synchronize();
  const size_t N = static_cast<size_t>(B) * T;
  int32_t* staged_inputs = staging_.get();
  int32_t* staged_targets = staged_inputs + max_tokens_;
  if (first_stage) {
    std::copy_n(inputs, N, staged_inputs);
    memory_.to_device_async(slot.inputs, staged_inputs, N * sizeof(int32_t));
    in_flight_ = true;
  }
  if (last_stage && targets) {
    std::copy_n(targets, N, staged_targets);
    memory_.to_device_async(slot.targets, staged_targets, N * sizeof(int32_t));
    in_flight_ = true;
  }
  if (documents_.token < 0) return;
  // Every stage's attention needs the documents: each reads the inputs.
  LLM_CHECK(inputs, "transformer: document masking needs the micro-batch's tokens on every stage");
  int32_t* starts = staged_targets + max_tokens_;
  int32_t* positions = starts + max_tokens_;
  for (size_t n = 0; n < N; ++n) {
    const int t = static_cast<int>(n % T);
    const int32_t* row = inputs + (n - static_cast<size_t>(t));
    starts[n] = t == 0 ? 0 : documents_.starts_at(row, static_cast<size_t>(t)) ? t : starts[n - 1];
    positions[n] = t - starts[n];
  }
  memory_.to_device_async(slot.doc_start, starts, N * sizeof(int32_t));
  if (slot.positions) memory_.to_device_async(slot.positions, positions, N * sizeof(int32_t));
  in_flight_ = true;
}

}  // namespace llm
