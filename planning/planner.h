// `./train plan`: per-rank memory of a config for every parallel mode x
// activation checkpointing x precision at a given world size, whether it fits
// a device, and the recommended setting. It uses the trainer's own accounting
// (memory_plan: the same buffer plans the engine and the model allocate from),
// so planned and measured bytes cannot drift apart.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "config/config.h"
#include "planning/memory_plan.h"

namespace llm {

struct PlanRow {
  int tensor_parallel = 1;    // T
  int pipeline_parallel = 1;  // P
  int data_parallel = 1;      // D = world / (T P), what the mode applies over
  double bubble = 0;          // pipeline_bubble_fraction(P, M) for the config's M at D
  std::string mode;           // "hybrid/8" carries its shard group size
  Recompute checkpointing;
  Precision precision;
  OffloadTarget offload = OffloadTarget::none;
  MemoryPlan memory;  // memory.state.host: the offloaded optimizer's host bytes
  bool fits;          // on the device (host memory is not checked)
};

// Every combination, in order of increasing communication, then compute
// (recomputation), preferring bf16 within each; then the bf16 rows again
// with the optimizer offloaded to the host (which costs host<->device
// traffic and host time on every step, so it comes last); then, for each
// tensor-parallel degree T = 2, 4, ... that divides the world and the model
// (up to a node's devices_per_node ranks, as TP wants the fastest links),
// the bf16 rows of every mode over world / T (TP's per-layer collectives
// cost more than any data-parallel mode's, so they come after); then, for
// each pipeline degree P = 2, 4, 8 that the layers and the world allow (with
// untied embeddings), the bf16 rows of every such T and mode over world /
// (T P) (pipeline rows come last: every stage idles for the bubble, (P - 1) /
// (M + P - 1) of a step, which grows with P; the memory is the largest
// stage's under the config's schedule).
std::vector<PlanRow> plan_memory(const Config& config, int world, int hybrid_group,
                                 size_t device_bytes, int devices_per_node = 8);

// What a rank may use: the device's memory less what the runtime keeps.
// kDeviceReserve is the same estimate as the hardware profiles'
// reserved_memory (CUDA context, NCCL buffers, allocator slack), so
// `./train plan` and `./train scale` agree on what fits.
inline constexpr size_t kDeviceReserve = size_t{3} << 30;
struct MemoryBudget {
  size_t device = 0;
  size_t reserved = 0;
  size_t usable() const { return device > reserved ? device - reserved : 0; }
};

// Fraction of the usable memory the recommended setting leaves free, for
// fragmentation and transient buffers the plan does not list.
inline constexpr double kRecommendedHeadroom = 0.10;

// The first row using at most (1 - kRecommendedHeadroom) of usable_bytes
// (nullptr when none does).
const PlanRow* plan_recommend(const std::vector<PlanRow>& rows, size_t usable_bytes);

// The command-line flags that select `row` (hybrid rows with groups of
// hybrid_group).
std::string plan_row_flags(const PlanRow& row, int hybrid_group);

// Parses "80GiB", "40GB", "512MiB", "1000000B"; a bare number is refused (is
// "80" bytes or GiB?); errors name `what`.
size_t parse_bytes(const std::string& text, const std::string& what);

void plan_print(const Config& config, int world, int hybrid_group, const MemoryBudget& budget);

}  // namespace llm
