// `./train scale`: scaling curves and their validation.
//  - Sweep (default): the FSDP paper's two figures as curves (figure
//    model_scale: T5 611M / 2.28B / 11.3B x four strategies, batch 8 per GPU,
//    bf16; figure batch_scale: 11.3B full sharding at batch 8 and 16 per GPU,
//    and fp32), or with --configs / --strategies / --batch-per-gpu /
//    --precision a grid of those; for every curve and GPU count, per-GPU
//    memory from the planner's accounting (memory_plan, so out-of-memory
//    points are the planner's) and step time, its parts and TFLOPS per GPU
//    from the throughput model, one row per point in <out>/scaling.csv,
//    plotted to <out>/scaling.png by tools/plot_scaling.py. With --measure, every point this
//    machine can run (at most --measure-max-ranks ranks, fitting its memory) is also run for real
//    under mpirun and its measured step time overlaid. Strategies (the FSDP paper's names):
//    full_shard = zero3; hybrid = hybrid with shard groups of a node's devices (the whole world
//    when it fits in a node); full_replication = FSDP NO_SHARD = our ddp, whose gradients are
//    all-reduced unit by unit during backward; ddp = the same traffic in
//    PyTorch DDP's 25 MiB buckets. Weak scaling: each GPU keeps the curve's
//    batch per GPU (default the config's batch_size) in the config's number
//    of micro-batches per step. --rate-dispersion D replaces the profile's
//    device.rate_dispersion (the spread whose slowest GPU each step waits for).
//  - --validate: every engine mode of each config at each rank count on this
//    machine, predicted (hardware profile) against measured, with the error.
//  - --calibrate: measures this machine into a profile (calibration.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "schema/config.h"

namespace llm {

// Parses the options given after `./train scale` (name, value; flags have an
// empty value) and runs the chosen mode; `overrides` (section.key=value)
// apply to every config, predicted and measured. Returns the exit status.
int scale_command(const std::vector<std::pair<std::string, std::string>>& options,
                  const std::vector<std::string>& overrides);

// Paper strategy -> engine mode: {mode, shard group size (0: none), ddp buckets}.
struct StrategyMode {
  ParallelMode mode;
  int shard_group_size = 0;
  bool ddp_buckets = false;
};
StrategyMode strategy_mode(const std::string& strategy, int gpus, int devices_per_node);

}  // namespace llm
