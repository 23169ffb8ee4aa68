// The mesh of ranks and the sharding preset of a parallel mode, built once
// from the world and the config, and passed explicitly (nothing reads global
// rank state).
// Placement: world = T x D x P (T = parallel.tensor_parallel, P =
// parallel.pipeline_parallel); world rank r = t + T * (d + D * p), so a
// tensor-parallel group is T consecutive ranks (the fastest links, inside a
// node), and a pipeline stage is a block of T x D consecutive ranks. The
// data-parallel group links the ranks with the same (t, p); the parallel mode
// (ddp ... hybrid) applies inside it unchanged: shard groups are blocks of
// consecutive data-parallel ranks, the replicate group links the ranks
// holding the same shard index in every shard group. The pipeline group links
// the ranks with the same (t, d), in stage order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "schema/config.h"
#include "parallel/comm.h"

namespace llm {

// A parallel mode is a tuple; the named modes are presets:
//   ddp    (no sharding, group 1)        zero1 (optimizer, group = D)
//   zero2  (optimizer + gradients)       zero3/fsdp (+ parameters, group = D)
//   hybrid (all three inside groups of parallel.shard_group_size)
struct ShardingPlan {
  ParallelMode mode = ParallelMode::ddp;  // "fsdp" parses as zero3
  bool shard_optimizer = false;
  bool shard_grads = false;
  bool shard_params = false;
  int shard_group_size = 1;
  int data_parallel_size = 1;  // D, the ranks the mode applies over
};

// The mode's preset over data_parallel_size ranks (a config that
// config_validate and launch_validate passed).
ShardingPlan sharding_plan(const ParallelConfig& config, int data_parallel_size);

// The data-parallel size of a world: world / (tensor_parallel x
// pipeline_parallel) (refused, naming the keys, when that does not divide).
int data_parallel_size(const ParallelConfig& config, int world_size);

// The wire type gradients are reduced in (parallel.reduce_dtype).
inline WireType reduce_wire_type(const ParallelConfig& config) {
  return config.reduce_dtype == Precision::bf16 ? WireType::bf16 : WireType::f32;
}

struct Topology {
  Group& world;
  std::unique_ptr<Group> tensor;     // the T ranks splitting each layer
  std::unique_ptr<Group> pipeline;   // the P stages this rank's micro-batches pass through
  std::unique_ptr<Group> data;       // the D ranks with this rank's tensor slice
  std::unique_ptr<Group> shard;      // inside data: size plan.shard_group_size
  std::unique_ptr<Group> replicate;  // inside data: size D / shard_group_size
  // The ranks that together hold one copy of the model state: a shard group
  // at every tensor-parallel position of every stage (the gradient norm sums
  // over it).
  std::unique_ptr<Group> model_copy;
  // The T x P ranks that together hold the model's parameters once per
  // data-parallel rank (the whole model is assembled over it).
  std::unique_ptr<Group> model_parallel;
  ShardingPlan plan;

  Topology(Group& world, const ParallelConfig& config);
  // Data-parallel rank and size: each data-parallel rank reads distinct
  // micro-batches; the ranks of one tensor group read the same.
  int dp_rank() const { return data->rank(); }
  int dp_size() const { return data->size(); }
  // Whether this rank saves a checkpoint file: the ranks of data-parallel
  // replica 0, which together own every element once.
  bool checkpoint_writer() const { return replicate->rank() == 0; }
  // The world ranks of the checkpoint writers, ascending.
  std::vector<int> checkpoint_writers() const;
};

}  // namespace llm
