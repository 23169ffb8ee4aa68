// Process groups and the sharding preset of a parallel mode, built once from
// the world and the config, and passed explicitly (nothing reads global rank
// state). Shard groups are blocks of consecutive ranks (so a group can sit
// inside a node); the replicate group links the ranks holding the same shard
// index in every shard group.
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "parallel/comm.h"

namespace llm {

// A parallel mode is a tuple; the named modes are presets:
//   ddp    (no sharding, group 1)        zero1 (optimizer, group = world)
//   zero2  (optimizer + gradients)       zero3/fsdp (+ parameters, group = world)
//   hybrid (all three inside groups of parallel.shard_group_size)
struct ShardingPlan {
  ParallelMode mode = ParallelMode::ddp;  // "fsdp" parses as zero3
  bool shard_optimizer = false;
  bool shard_grads = false;
  bool shard_params = false;
  int shard_group_size = 1;
};

// Validates the mode against the world size; errors name the key.
ShardingPlan sharding_plan(const ParallelConfig& config, int world_size);

// The wire type gradients are reduced in (parallel.reduce_dtype).
inline WireType reduce_wire_type(const ParallelConfig& config) {
  return config.reduce_dtype == Precision::bf16 ? WireType::bf16 : WireType::f32;
}

struct Topology {
  Group& world;
  std::unique_ptr<Group> shard;      // size plan.shard_group_size
  std::unique_ptr<Group> replicate;  // size world / shard_group_size
  ShardingPlan plan;

  Topology(Group& world, const ParallelConfig& config);
  // Data-parallel rank and size: every rank reads distinct micro-batches.
  int dp_rank() const { return world.rank(); }
  int dp_size() const { return world.size(); }
};

}  // namespace llm
