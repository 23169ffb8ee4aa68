// One transformer block, described once: its parts (block_part.h) in order,
// and the table of its parameters that their rows make. The layout (and so
// checkpoints, sharding and the planner's sizes), the initialization, the
// Hugging Face names, the FLOP count and the tensor-parallel sum of the
// replicated gains' gradients all read this table; a new block feature is a
// part (a file in model/parts/) and its line in block.cpp's list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/block_part.h"
#include "schema/config.h"

namespace llm {

// The parts of a block of `config`, in order, each with its first row in
// the block table.
struct PlacedPart {
  const BlockPartDeclaration* part;
  int first_row;
};
std::vector<PlacedPart> block_parts(const ModelConfig& config);

// Every part a block may have, whether `config` turns it on or not.
const std::vector<const BlockPartDeclaration*>& all_block_parts();

// The block's tensors of a model, in their order in the unit: its parts'
// rows, part by part.
std::vector<BlockTensorSpec> block_tensors(const ModelConfig& config);

// A replicated tensor of the block (a gain) and where its gradient sits in a
// buffer holding all of theirs back to back, in table order: under tensor
// parallelism each rank's part of them is summed over the group by one
// collective per block.
struct ReplicatedGain {
  int row;        // its row of the block table
  int64_t width;  // its elements (a vector's rows)
  int64_t at;     // where its gradient starts in the buffer
};
struct ReplicatedGains {
  std::vector<ReplicatedGain> gains;
  int64_t width = 0;  // the buffer's length: every gain's width
};
ReplicatedGains replicated_gains(const ModelConfig& config);

}  // namespace llm
