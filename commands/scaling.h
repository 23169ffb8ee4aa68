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

#include <optional>
#include <string>
#include <vector>

#include "commands/command.h"
#include "commands/measure_run.h"
#include "schema/config.h"

namespace llm {

// The FSDP paper's configs and strategies, its figures' curves.
inline const std::vector<std::string> kPaperConfigs = {"configs/scaling/t5_611m.toml",
                                                       "configs/scaling/t5_2.28b.toml",
                                                       "configs/scaling/t5_11.3b.toml"};
inline const std::vector<std::string> kPaperStrategies = {"ddp", "full_replication", "hybrid",
                                                          "full_shard"};

// `./train scale`'s command line, declared once (command_options.h).
struct ScaleArguments {
  static constexpr const char* kName = "scale";
  static constexpr const char* kAbout =
      "Scaling curves: by default the FSDP paper's two figures (T5 611M / 2.28B / 11.3B x ddp, "
      "full_replication, hybrid, full_shard; 11.3B full_shard at batch 8 and 16 per GPU), else "
      "the grid --configs, --strategies, --batch-per-gpu and --precision name; per GPU count, "
      "memory from the planner and step time (compute, contention, exposed communication, "
      "optimizer) and TFLOPS per GPU from the throughput model, into DIR/scaling.csv and "
      "DIR/scaling.png. Overrides apply to every config (predicted and measured). --validate: "
      "every mode at each rank count on this machine, predicted (cost_models/hardware/"
      "cpu_dev_vm.toml) against measured step time, with the error. --calibrate: measure this "
      "machine (sgemm, memory, MPI, host AdamW, copies) into a hardware profile. --offload: the "
      "predicted step time of --config without offload, with ZeRO-Offload (with and without "
      "offload.delayed_update) and with ZenFlow, and the parts: host AdamW, PCIe each way, "
      "exposed host time, GPU idle.";
  static constexpr bool kTakesOverrides = true;

  bool validate = false, calibrate = false, offload = false, comm_bench = false;
  std::string hardware;              // empty: the mode's default
  std::vector<std::string> configs;  // empty: the mode's default
  std::vector<std::string> strategies = kPaperStrategies;
  std::vector<int> batches;             // empty: the config's batch_size
  std::vector<std::string> precisions;  // empty: the config's
  std::vector<int> gpus = {8, 16, 32, 64, 128, 256, 512};
  std::vector<int> ranks = {1, 2, 4};
  std::vector<ParallelMode> modes = {ParallelMode::ddp, ParallelMode::zero1, ParallelMode::zero2,
                                     ParallelMode::zero3, ParallelMode::hybrid};
  std::string out;  // empty: the mode's default
  bool measure = false, no_plot = false;
  int measure_max_ranks = 4;
  int hybrid_group = 0;
  std::optional<double> rate_dispersion;  // replaces the profile's device.rate_dispersion
  std::string config;                     // --calibrate's and --offload's
  std::optional<int> world;               // --offload's; default a node's devices
  MeasureOptions run;

  template <class V>
  void visit_fields(V&& v) {
    v("validate", validate, "validate the throughput model against runs on this machine");
    v("calibrate", calibrate, "measure this machine into a hardware profile");
    v("offload", offload, "the offload model's step times for --config");
    v("comm-bench", comm_bench,
      "(under mpirun, for --calibrate) time all-reduces of 8 B to 64 MiB");
    v("hardware", hardware,
      "the hardware profile (default: a100_80gb_roce.toml; --validate: cpu_dev_vm.toml; "
      "--offload: a100_80gb_pcie4x4.toml; in cost_models/hardware/)",
      "FILE");
    v("configs", configs,
      "the configs of the grid (default: the paper's T5 configs; --validate: configs/tiny.toml "
      "and configs/scale_cpu.toml)",
      "A,B");
    v("strategies", strategies, "the grid's strategies", "S,T");
    v("batch-per-gpu", batches,
      "the grid's sequences per GPU; when not given, the config's batch_size", at_least(1));
    v("precision", precisions, "the grid's precisions, e.g. bf16,fp32 (default: the config's)",
      "P,Q");
    v("gpus", gpus, "the GPU counts of the curves", at_least(1));
    v("ranks", ranks, "--validate's rank counts", at_least(1));
    v("modes", modes, "--validate's parallel modes");
    v("out", out,
      "where the results go (default: results/scaling; --validate: results/validation; "
      "--calibrate: cost_models/hardware/cpu_dev_vm.toml)",
      "DIR");
    v("measure", measure, "also run (mpirun) the points this machine can run, and overlay them");
    v("no-plot", no_plot, "no scaling.png");
    v("measure-max-ranks", measure_max_ranks, "the most ranks --measure runs", at_least(1));
    v("hybrid-group", hybrid_group, "hybrid's shard groups; 0: a node's devices",
      OptionRule("G", kNonNegative));
    v("rate-dispersion", rate_dispersion,
      "replaces the profile's device.rate_dispersion; 0: no slowest-GPU wait",
      OptionRule("D", kUnitClosed));
    v("config", config,
      "--offload's config (required there); --calibrate's (default configs/scale_cpu.toml)",
      "FILE");
    v("world", world, "--offload's ranks; when not given, a node's devices", at_least(1));
    v("steps", run.steps, "steps of each measured run (the first is not timed)", at_least(2));
    v("repeats", run.repeats, "runs of each measured point; the fastest counts",
      OptionRule("R", at_least(1)));
    v("launcher", run.launcher, "how to start N ranks (the command before -np N)", "COMMAND");
    v("train-binary", run.train_binary, "the trainer the measured runs start", "FILE");
  }
};

// Runs the mode the arguments choose; the command line's overrides apply to
// every config, predicted and measured. Returns the exit status.
int run_scale(const ScaleArguments& arguments, const CommandLine& line);

// Paper strategy -> engine mode: {mode, shard group size (0: none), ddp buckets}.
struct StrategyMode {
  ParallelMode mode;
  int shard_group_size = 0;
  bool ddp_buckets = false;
};
StrategyMode strategy_mode(const std::string& strategy, int gpus, int devices_per_node);

}  // namespace llm
