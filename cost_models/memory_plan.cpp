// Memory per rank before allocating (see memory_plan.h).
#include "cost_models/memory_plan.h"

#include <algorithm>

#include "device/device.h"
#include "base/error.h"
#include "base/system.h"
#include "model/layout.h"
#include "parallel/pipeline_schedule.h"
#include "model/transformer.h"
#include "schema/key_values.h"

namespace llm {

MemoryPlan memory_plan(const Config& config, const ShardingPlan& sharding) {
  // The largest over pipeline stages (the tensor-parallel splits are even:
  // every rank of a stage holds the same).
  const TrainingConfig& t = config.training;
  const int tp = config.parallel.tensor_parallel, pp = config.parallel.pipeline_parallel;
  const int micro_batches =
      std::max(1, t.batch_size / (t.micro_batch_size * sharding.data_parallel_size));
  MemoryPlan plan;
  for (int stage = 0; stage < pp; ++stage) {
    const ModelSlice slice{0, tp, stage, pp};
    MemoryPlan stage_plan;
    stage_plan.state =
        ShardingEngine::planned_bytes(layout_build(config.model, slice), sharding, config);
    stage_plan.activations =
        Transformer::activation_bytes(
            config.model, t.micro_batch_size, t.seq_len, recompute_plan(t), config.precision(),
            slice, pipeline_in_flight(config.parallel.pipeline_schedule, pp, stage, micro_batches),
            t.loss_chunk_tokens)
            .total;
    if (stage == 0 || stage_plan.total() > plan.total()) plan = stage_plan;
  }
  plan.micro_batches = micro_batches;
  return plan;
}

RankMemory rank_memory_declared(const Config& config) {
  const std::string& limit = config.parallel.memory_per_rank;
  if (limit.empty()) return {0, ""};
  return {parse_bytes(limit, "parallel.memory_per_rank"), "parallel.memory_per_rank gives"};
}

RankMemory rank_memory_available(const Config& config, int ranks_per_node) {
  const int ranks = std::max(ranks_per_node, 1);
  RankMemory measured{memory_available_bytes() / ranks, "this machine has"};
  if (config.device() == Device::cuda) {
    const int gpus = std::max(cuda_device_count(), 1);
    const int ranks_per_gpu = (ranks + gpus - 1) / gpus;
    measured = {cuda_free_bytes() / ranks_per_gpu, "this GPU has"};
  }
  const RankMemory declared = rank_memory_declared(config);
  const bool declared_less =
      declared.bytes > 0 && (measured.bytes == 0 || declared.bytes < measured.bytes);
  return declared_less ? declared : measured;
}

void check_memory_fits(const Config& config, const ShardingPlan& sharding,
                       const RankMemory& available) {
  MemoryPlan plan = memory_plan(config, sharding);
  // On the CPU the offloaded optimizer's host memory is the same memory.
  const size_t needed = plan.total() + (config.device() == Device::cpu ? plan.state.host : 0);
  LLM_CHECK(available.bytes == 0 || needed <= available.bytes,
            "{}: needs {} per rank in mode {} (parameters {}, gradients {}, optimizer {}, buffers "
            "{}, activations {}, offloaded optimizer {}) but {} {} available per rank",
            config.path, format_bytes(needed), sharding.mode, format_bytes(plan.state.params),
            format_bytes(plan.state.grads), format_bytes(plan.state.optimizer),
            format_bytes(plan.state.buffers), format_bytes(plan.activations),
            format_bytes(plan.state.host), available.where, format_bytes(available.bytes));
}

int micro_batches_per_step(const TrainingConfig& t, int dp_size) {
  const int per_step = t.micro_batch_size * dp_size;
  LLM_CHECK(t.batch_size % per_step == 0,
            "training.batch_size ({}) must be a multiple of training.micro_batch_size ({}) x "
            "data-parallel ranks ({})",
            t.batch_size, t.micro_batch_size, dp_size);
  return t.batch_size / per_step;
}

}  // namespace llm
