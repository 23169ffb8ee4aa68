// A micro-batch's tokens, from the host to its activation slot: the inputs
// (first stage), the targets (last stage), and with document masking each
// token's document start and RoPE position, worked out on the host. The
// copies go through staging memory (device_memory.h) and are queued without
// a wait, so a micro-batch runs from its upload to its loss read-back
// without a host sync; the staging is rewritten only once the device has
// passed the last upload (a read-back since, or else an explicit
// synchronize).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "device/arena.h"
#include "device/device_memory.h"
#include "data/document_boundary.h"

namespace llm {

// One activation slot's tokens on the device (null where the stage or the
// run has none).
struct SlotTokens {
  int32_t* inputs = nullptr;   // (N)
  int32_t* targets = nullptr;  // (N)
  // Document masking only (in the uploads' own arena): per token, the
  // position its document starts at in its sequence, and its RoPE position
  // (null unless positions reset).
  int32_t* doc_start = nullptr;  // (N)
  int32_t* positions = nullptr;  // (N)
};

class TokenUploads {
 public:
  TokenUploads(const DeviceMemory& memory, int max_batch, int max_seq);

  // Document masking from now on: documents start where `boundary` says;
  // plans every slot's doc_start (and, with reset_positions, positions).
  // Once, before use.
  void set_document_masking(DocumentBoundary boundary, bool reset_positions,
                            const std::vector<SlotTokens*>& slots);
  // Queues the copy of the tokens this stage reads (inputs on the first,
  // targets, when not null, on the last) into `slot`; with document masking
  // every stage reads the inputs.
  void upload(SlotTokens& slot, const int32_t* inputs, const int32_t* targets, int B, int T,
              bool first_stage, bool last_stage);
  // A read-back has waited for the device: the staging is free again.
  void device_passed() { in_flight_ = false; }

 private:
  const DeviceMemory& memory_;
  size_t max_tokens_;
  // inputs, targets, document starts and positions, max_tokens_ each.
  std::unique_ptr<int32_t, void (*)(void*)> staging_{nullptr, nullptr};
  bool in_flight_ = false;
  DocumentBoundary documents_;  // token -1: off
  Arena arena_;
};

}  // namespace llm
