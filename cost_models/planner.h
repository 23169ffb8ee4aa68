// `./train plan`'s rows: per-rank memory of a config for every mesh x
// parallel mode x activation recomputation x precision x offload at a given
// world size, and whether it fits a device. It uses the trainer's own
// accounting (memory_plan: the same buffer plans the engine and the model
// allocate from), so planned and measured bytes cannot drift apart. Each
// row carries its config, built from the overrides its command line
// prints. Ranking rows by speed: plan_ranking.h.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "schema/config.h"
#include "cost_models/memory_plan.h"

namespace llm {

struct PlanRow {
  int tensor_parallel = 1;    // T
  int pipeline_parallel = 1;  // P
  int data_parallel = 1;      // D = world / (T P), what the mode applies over
  double bubble = 0;          // pipeline_bubble_fraction(P, M) for the config's M at D
  std::string mode;           // "hybrid/8" carries its shard group size
  Recompute recompute;
  Precision precision;
  OffloadTarget offload = OffloadTarget::none;
  // The base config with the row's settings applied as overrides: each
  // setting the row decides (mesh, mode, recomputation, precision, reduce
  // dtype, offload, ZenFlow off) where it differs from the base, appended to
  // config.overrides, which is then the command line that runs the row.
  Config config;
  MemoryPlan memory;  // memory.state.host: the offloaded optimizer's host bytes
  bool fits;          // on the device (host memory is not checked)
};

// Every combination, in the planner's order (the order ties and rows the
// throughput model does not rank keep): the device-resident rows by
// increasing communication, then recomputation, bf16 before fp32; then the
// bf16 rows again with the optimizer offloaded to the host; then, for each
// tensor-parallel degree T = 2, 4, ... that divides the world and the model
// (up to a node's devices_per_node ranks, as TP wants the fastest links),
// the bf16 rows of every mode over world / T; then, for each pipeline degree
// P = 2, 4, 8 that the layers and the world allow (with untied embeddings),
// the bf16 rows of every such T and mode over world / (T P) (the memory is
// the largest stage's under the config's schedule, the bubble (P - 1) /
// (M + P - 1) of a step).
std::vector<PlanRow> plan_memory(const Config& config, int world, int hybrid_group,
                                 size_t device_bytes, int devices_per_node);

// Parses "80GiB", "40GB", "512MiB", "1000000B"; a bare number is refused (is
// "80" bytes or GiB?); errors name `what`.
size_t parse_bytes(const std::string& text, const std::string& what);

}  // namespace llm
