// One transformer block's parameters, described once: each tensor's name,
// its rows as the Hugging Face tensors stacked in it, its tensor-parallel
// split, its initialization and whether recomputation runs its matmul again.
// The layout (and so checkpoints, sharding and the planner's sizes), the
// initialization, the Hugging Face names, the FLOP count and the
// tensor-parallel sum of the replicated gains' gradients all read this
// table; a new block parameter is a row here, a field of BlockTensors
// (layout.h) and its use in the transformer's forward and backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/layout.h"
#include "settings/config.h"

namespace llm {

// How a block tensor splits across a tensor-parallel group of T ranks.
enum class TensorParallelSplit {
  replicated,  // held whole by every rank (norm gains)
  rows,        // column-parallel: each part's rows split evenly (heads, ffn columns)
  columns,     // row-parallel: its columns (the input features) split evenly
};

// Consecutive rows of a block tensor that are one Hugging Face tensor.
struct TensorPart {
  std::string hf_name;  // after "model.layers.<l>.", e.g. "self_attn.q_proj.weight"
  int64_t rows;
};

struct BlockTensorSpec {
  std::string name;               // after "layers.<l>.", e.g. "attn.wqkv"
  size_t BlockTensors::*offset;   // where the layout records its offset in the unit
  std::vector<TensorPart> parts;  // its rows, top to bottom (a vector: one part)
  int64_t columns = 0;            // 0: a vector (a norm gain, initialized to ones)
  TensorParallelSplit split = TensorParallelSplit::replicated;
  // Adds to the residual stream: initialized with init_std / sqrt(2 n_layers).
  bool output_projection = false;
  // Its matmul runs again when full recomputation redoes the block's forward
  // (everything up to the last projection, whose output is not needed).
  bool recomputed = true;

  int64_t rows() const;
  bool matrix() const { return columns > 0; }
};

// The block's tensors of a model, in their order in the unit.
std::vector<BlockTensorSpec> block_tensors(const ModelConfig& config);

// A replicated tensor of the block (a gain) and where its gradient sits in a
// buffer holding all of theirs back to back, in table order: under tensor
// parallelism each rank's part of them is summed over the group by one
// collective per block.
struct ReplicatedGain {
  size_t BlockTensors::*offset;
  int64_t width;  // its elements (a vector's rows)
  int64_t at;     // where its gradient starts in the buffer
};
struct ReplicatedGains {
  std::vector<ReplicatedGain> gains;
  int64_t width = 0;  // the buffer's length: every gain's width
};
ReplicatedGains replicated_gains(const ModelConfig& config);

}  // namespace llm
