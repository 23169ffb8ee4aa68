// Mode presets and group construction.
#include "parallel/topology.h"

#include "runtime/error.h"

namespace llm {

ShardingPlan sharding_plan(const ParallelConfig& config, int world_size) {
  ShardingPlan plan;
  plan.mode = config.mode;
  LLM_CHECK(plan.mode == ParallelMode::hybrid || config.shard_group_size == 0,
            "parallel.shard_group_size is only used by mode hybrid (mode is {})", to_string(config.mode));
  if (plan.mode == ParallelMode::ddp) return plan;
  plan.shard_optimizer = true;
  plan.shard_grads = plan.mode != ParallelMode::zero1;
  plan.shard_params = plan.mode == ParallelMode::zero3 || plan.mode == ParallelMode::hybrid;
  plan.shard_group_size = world_size;
  if (plan.mode == ParallelMode::hybrid) {
    int s = config.shard_group_size;
    LLM_CHECK(s > 0 && world_size % s == 0,
              "parallel.shard_group_size ({}) must be set and divide the world size ({}) for "
              "mode hybrid",
              s, world_size);
    plan.shard_group_size = s;
  }
  return plan;
}

Topology::Topology(Group& world_group, const ParallelConfig& config)
    : world(world_group), plan(sharding_plan(config, world_group.size())) {
  const int s = plan.shard_group_size, r = world.rank();
  shard = world.split(/*color=*/r / s, /*key=*/r);
  replicate = world.split(/*color=*/r % s, /*key=*/r);
}

}  // namespace llm
