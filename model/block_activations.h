// Where a block's parts keep their activations: per activation slot and
// block, or, in a block that drops it (training.recompute), a scratch buffer
// every such block shares; and the backward's scratch, shared by every
// block. Parts declare each buffer once (BlockPart::plan); this file decides
// who keeps what and sums the bytes, for the transformer and the planner.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "model/layout.h"
#include "device/arena.h"
#include "schema/config.h"

namespace llm {

// Recompute (none | selective | full) is training.recompute's enum (config.h).
struct RecomputePlan {
  Recompute mode = Recompute::none;
  int every = 1;  // blocks l with l % every == 0 are recomputed
  bool recomputes(int layer) const { return mode != Recompute::none && layer % every == 0; }
};
RecomputePlan recompute_plan(const TrainingConfig& training);

// The sizes one rank works with: N tokens of a micro-batch (at most), n = N
// / tp of them in its residual rows; its share of heads, ffn columns and
// vocabulary.
struct RankShape {
  size_t N, n, C, H, KV, D, F, V, QKV, HD;
  int tp;
  RankShape(const ModelConfig& c, int B, int T, int tp_size);
};

// Activation memory of one configuration, computed without allocating.
struct ActivationBytes {
  size_t per_block_kept = 0;        // what one non-recomputed block keeps
  size_t per_block_recomputed = 0;  // what one recomputed block keeps (beyond its input)
  size_t residual_stream = 0;       // the stage's block inputs and last output
  size_t recompute_scratch = 0;     // one block's worth, shared by recomputed blocks
  // tokens, final norm, one chunk of logits (loss_chunk_rows x V), loss partials, losses, RoPE
  // tables
  size_t head_and_loss = 0;
  size_t backward_scratch = 0;  // gradient buffers reused by every block
  // precision fp8: one block matmul's FP8 activations, every block weight's FP8
  // codes both ways (cast once per parameter version), and their scales
  size_t fp8_copies = 0;
  size_t total = 0;
};

// Which activations a block keeps for its backward.
enum class Keep {
  expensive,  // a matmul's or attention's output: dropped only by full recomputation
  cheap,      // a norm's or SwiGLU's: dropped by any recomputation, made again in backward
};

// One activation buffer of every block: [slot][block of the stage].
template <class T>
struct PerBlock {
  std::vector<std::vector<T*>> at;
  T* scratch = nullptr;  // what the blocks that drop it work in
  T* get(int slot, int block) const { return at[slot][block]; }
};

class BlockActivations {
 public:
  BlockActivations(int slots, LayerRange layers, RecomputePlan recompute);

  template <class T>
  void add(PerBlock<T>& buffer, size_t elements, Keep keep) {
    const size_t bytes = elements * sizeof(T);
    kept_probe_.add_bytes(probe_, bytes);
    if (keep == Keep::expensive && recompute_.mode == Recompute::selective)
      recomputed_probe_.add_bytes(probe_, bytes);
    buffer.at.assign(slots_, std::vector<T*>(layers_.count(), nullptr));
    bool dropped = false;
    for (int s = 0; s < slots_; ++s) {
      for (int l = layers_.begin; l < layers_.end; ++l) {
        if (keeps(l, keep))
          blocks_.add(buffer.at[s][l - layers_.begin], elements);
        else
          dropped = true;
      }
    }
    if (!dropped) return;
    scratch_.add(buffer.scratch, elements);
    redirects_.push_back([this, &buffer, keep] {
      for (int s = 0; s < slots_; ++s) {
        for (int l = layers_.begin; l < layers_.end; ++l) {
          if (!keeps(l, keep)) buffer.at[s][l - layers_.begin] = buffer.scratch;
        }
      }
    });
  }
  // Backward scratch, one for every block.
  template <class T>
  void add_backward(T*& buffer, size_t elements) {
    backward_.add(buffer, elements);
  }

  // Each kind's buffers, to bind in the transformer's arena.
  const BufferPlan& blocks() const { return blocks_; }
  const BufferPlan& scratch() const { return scratch_; }
  const BufferPlan& backward() const { return backward_; }
  // What one block keeps when it is not recomputed, and when it is.
  size_t per_block_kept() const { return kept_probe_.bytes(); }
  size_t per_block_recomputed() const { return recomputed_probe_.bytes(); }
  // Once bound: the blocks that drop a buffer point at its scratch.
  void redirect() const;

 private:
  bool keeps(int layer, Keep keep) const {
    return !recompute_.recomputes(layer) ||
           (keep == Keep::expensive && recompute_.mode == Recompute::selective);
  }

  int slots_;
  LayerRange layers_;
  RecomputePlan recompute_;
  BufferPlan blocks_, scratch_, backward_;
  BufferPlan kept_probe_, recomputed_probe_;  // sizes only, never bound
  void* probe_ = nullptr;
  std::vector<std::function<void()>> redirects_;
};

}  // namespace llm
