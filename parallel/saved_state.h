// What a checkpoint saves of the model state, as the one source for the
// writer's host copy (persistence/background_save.h) and the planner's
// checkpoint bytes (cost_models/save_cost.h): each writing rank saves, per
// element it owns, its fp32 parameter and both AdamW moments; the writers
// are one replica's ranks (docs/checkpoints.md, "On disk").
// Invariant: a shard file holds saved_state_bytes of its rank's shards plus
// its records' index (a few KB), tested against real saves.
#pragma once

#include <cstddef>
#include <vector>

#include "parallel/unit_shards.h"

namespace llm {

// Bytes saved per owned element: the fp32 parameter, first and second moment.
inline constexpr size_t kSavedBytesPerElement = 3 * sizeof(float);

// The bytes a checkpoint saves of a rank owning `shards`.
size_t saved_state_bytes(const std::vector<UnitShard>& shards);

// The world ranks that write a shard, ascending: the shard group's ranks of
// the first replica, in every tensor and pipeline position, for a mesh of T
// tensor x D data x P pipeline ranks whose data ranks shard in groups of S.
std::vector<int> checkpoint_writer_ranks(int T, int D, int P, int S);

}  // namespace llm
