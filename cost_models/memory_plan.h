// What a config needs per rank before anything is allocated, and whether it
// fits: model state (the sharding engine's planned bytes) plus activations
// (the transformer's), the largest over pipeline stages; the memory a rank
// may use; the micro-batches of a step. Read by the trainer before it
// allocates and by the planner for every row it prints.
// Invariant: the figures are the ones the engine and the model allocate
// (tested against their arenas), never estimates of them.
#pragma once

#include <cstddef>
#include <string>

#include "schema/config.h"
#include "parallel/sharding_engine.h"

namespace llm {

// What the model state, activations and batch buffers of a config need on
// one rank; computed without allocating.
struct MemoryPlan {
  StateBytes state;
  size_t activations = 0;
  int micro_batches = 1;  // per step and data-parallel rank (the in-flight slots' M)
  size_t total() const { return state.total() + activations; }
};
MemoryPlan memory_plan(const Config& config, const ShardingPlan& plan);

// Memory one rank may use, and where it is ("this machine has", "this GPU
// has"): the host's available memory (or, with training.device = cuda, this
// GPU's free memory) shared by `ranks_per_node` processes, or
// parallel.memory_per_rank when that is less; 0 bytes when unknown.
struct RankMemory {
  size_t bytes;
  std::string where;
};
RankMemory rank_memory_available(const Config& config, int ranks_per_node);
// parallel.memory_per_rank: what the config says a rank of any host may use,
// known without running there (0 bytes when unset).
RankMemory rank_memory_declared(const Config& config);

// Throws, with one line naming the config and both figures, when the plan
// exceeds what is available (0 bytes, unknown, passes).
void check_memory_fits(const Config& config, const ShardingPlan& plan, const RankMemory& available);

// Micro-batches per rank per step: batch_size / (micro_batch_size x dp_size);
// throws naming the keys when that does not divide.
int micro_batches_per_step(const TrainingConfig& training, int dp_size);

}  // namespace llm
