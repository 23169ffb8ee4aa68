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

#include "commands/command.h"
#include "commands/measure_run.h"
#include "schema/config.h"
#include "schema/key_values.h"

namespace llm {

struct PlanOptions {
  int world = 1;
  int hybrid_group = 0;  // shard groups of hybrid rows; 0: a node's devices, at most world
  std::string hardware;  // profile path; empty: plan_default_hardware(config)
  std::optional<ByteSize> device_memory;    // per rank; default the profile's
  std::optional<ByteSize> reserved_memory;  // of it, the runtime's; default the profile's
  int top = 0;                              // table rows printed; 0: every row
  bool measure = false;  // run the first `top` ranked rows here (3 when top is 0)
  MeasureOptions run;
};

// `./train plan`'s command line: PlanOptions and the config, declared once
// (command_options.h).
struct PlanArguments : PlanOptions {
  static constexpr const char* kName = "plan";
  static constexpr const char* kAbout =
      "What to run on N ranks: every mesh x parallel mode x activation recompute x precision x "
      "offload with its memory per rank, the rows that fit ranked by the throughput model's "
      "predicted step on the hardware profile, fastest first; the rows it could not rank and "
      "why; and the fastest that fits with 10% to spare, as a command line with its predicted "
      "step, the step's parts and the memory headroom.";
  static constexpr bool kTakesOverrides = true;

  std::string config;

  template <class V>
  void visit_fields(V&& v) {
    v("config", config, kConfigOptionDoc, required("FILE"));
    v("world", world, "ranks to plan for", kPositive);
    v("hardware", hardware,
      "the hardware profile (default: cost_models/hardware/h100_sxm.toml for a CUDA config, "
      "cpu_dev_vm.toml for a CPU one)",
      "FILE");
    v("gpu-memory", device_memory, "memory per rank, e.g. 80GiB (default: the profile's)");
    v("reserved", reserved_memory,
      "of it, what the runtime keeps, e.g. 3GiB (default: the profile's)");
    v("shard-group", hybrid_group, "hybrid rows' shard groups; 0: a node's devices",
      OptionRule("G", kNonNegative));
    v("top", top, "print the first K rows; 0: every row", OptionRule("K", kNonNegative));
    v("measure", measure,
      "also run the first rows here (3 without --top) and print the measured "
      "order");
    v("repeats", run.repeats, "with --measure: runs per row, the fastest counts",
      OptionRule("R", kPositive));
  }
};

// Runs `./train plan` as the command line asks.
int run_plan(const PlanArguments& arguments, const CommandLine& line);

// The profile a plan predicts on when --hardware names none: the H100
// cluster for a CUDA config, this machine's calibrated profile for a CPU one.
std::string plan_default_hardware(const Config& config);

// Prints the plan; returns the exit status (0).
int plan_command(const Config& config, const PlanOptions& options);

}  // namespace llm
