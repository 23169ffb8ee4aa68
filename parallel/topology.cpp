// Mode presets and mesh group construction.
#include "parallel/topology.h"

#include "base/error.h"

namespace llm {

ShardingPlan sharding_plan(const ParallelConfig& config, int dp_size) {
  ShardingPlan plan;
  plan.mode = config.mode;
  plan.data_parallel_size = dp_size;
  if (plan.mode == ParallelMode::ddp) return plan;
  plan.shard_optimizer = true;
  plan.shard_grads = plan.mode != ParallelMode::zero1;
  plan.shard_params = plan.mode == ParallelMode::zero3 || plan.mode == ParallelMode::hybrid;
  plan.shard_group_size = dp_size;
  if (plan.mode == ParallelMode::hybrid) plan.shard_group_size = config.shard_group_size;
  return plan;
}

int data_parallel_size(const ParallelConfig& config, int world_size) {
  const int t = config.tensor_parallel, p = config.pipeline_parallel;
  LLM_CHECK(t >= 1 && p >= 1 && world_size % (t * p) == 0,
            "parallel.tensor_parallel ({}) x parallel.pipeline_parallel ({}) must divide the world "
            "size ({})",
            t, p, world_size);
  return world_size / (t * p);
}

Topology::Topology(Group& world_group, const ParallelConfig& config)
    : world(world_group),
      plan(sharding_plan(config, data_parallel_size(config, world_group.size()))) {
  const int T = config.tensor_parallel, r = world.rank();
  const int D = data_parallel_size(config, world.size());
  const int t = r % T, d = (r / T) % D, p = r / (T * D), s = plan.shard_group_size;
  tensor = world.split(/*color=*/d + D * p, /*key=*/t);
  data = world.split(/*color=*/t + T * p, /*key=*/d);
  pipeline = world.split(/*color=*/t + T * d, /*key=*/p);
  shard = data->split(/*color=*/d / s, /*key=*/d);
  replicate = data->split(/*color=*/d % s, /*key=*/d);
  model_copy = world.split(/*color=*/d / s, /*key=*/r);
  model_parallel = world.split(/*color=*/d, /*key=*/r);
  // The watchdog names groups by these labels (the same on every member).
  tensor->set_label("tensor");
  data->set_label("data");
  pipeline->set_label("pipeline");
  shard->set_label("shard");
  replicate->set_label("replicate");
  model_copy->set_label("model_copy");
  model_parallel->set_label("model_parallel");
}

std::vector<int> Topology::checkpoint_writers() const {
  const int T = tensor->size(), D = data->size(), P = pipeline->size(), S = shard->size();
  std::vector<int> ranks;
  for (int p = 0; p < P; ++p) {
    for (int d = 0; d < S; ++d) {
      for (int t = 0; t < T; ++t) ranks.push_back(t + T * (d + D * p));
    }
  }
  return ranks;
}

}  // namespace llm
