// `./train plan`: what to run. The planner's rows (planner.h: memory per
// rank of every mesh, mode, recomputation, precision and offload) ranked by
// the throughput model's predicted speed on a hardware profile
// (plan_ranking.h), as a table, fastest first; then the rows it could not
// rank and why, and the recommendation: the exact command line, the
// predicted step and its parts, and the memory headroom. With --measure, the
// first rows of the table are also run here under mpirun and the predicted
// order set beside the measured one. See docs/memory.md, "Planning a
// launch".
// Invariant: it prints what plan_rank and plan_recommend return; it
// computes no cost of its own.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "commands/measure_run.h"
#include "schema/config.h"

namespace llm {

struct PlanOptions {
  int world = 1;
  int hybrid_group = 0;  // shard groups of hybrid rows; 0: a node's devices, at most world
  std::string hardware;  // profile path; empty: plan_default_hardware(config)
  std::optional<size_t> device_memory;    // per rank; default the profile's
  std::optional<size_t> reserved_memory;  // of it, the runtime's; default the profile's
  int top = 0;                            // table rows printed; 0: every row
  bool measure = false;                   // run the first `top` ranked rows here (3 when top is 0)
  MeasureOptions run;
};

// The profile a plan predicts on when --hardware names none: the H100
// cluster for a CUDA config, this machine's calibrated profile for a CPU one.
std::string plan_default_hardware(const Config& config);

// Prints the plan; returns the exit status (0).
int plan_command(const Config& config, const PlanOptions& options);

}  // namespace llm
