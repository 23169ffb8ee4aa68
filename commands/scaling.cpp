// `./train scale`: the sweep, its CSV and plot, validation against real runs,
// and option parsing (see scaling.h).
#include "commands/scaling.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "commands/calibration.h"
#include "base/cli_values.h"
#include "base/error.h"
#include "cost_models/hardware_profile.h"
#include "commands/measure_run.h"
#include "base/system.h"
#include "cost_models/throughput_model.h"
#include "trainer/trainer.h"
#include "model/layout.h"
#include "parallel/comm.h"
#include "parallel/topology.h"

namespace llm {
namespace {

constexpr size_t kDdpBucketBytes = 25u << 20;  // PyTorch DDP's bucket_cap_mb default

// One curve of a figure: a config under one strategy, batch per GPU,
// precision and recomputation, from the smallest to the largest GPU count.
struct Curve {
  std::string figure;     // model_scale | batch_scale | custom
  std::string config;     // path
  std::string strategy;   // ddp | full_replication | hybrid | full_shard
  int batch_per_gpu = 0;  // sequences per GPU per step; 0: the config's batch_size
  std::string precision;  // bf16 | fp32; empty: the config's
  std::string recompute;  // none | selective | full; empty: the config's
};

const std::vector<std::string> kPaperStrategies = {"ddp", "full_replication", "hybrid",
                                                   "full_shard"};

// The FSDP paper's two figures (Zhao et al. 2023, section 5): T5 611M,
// 2.28B and 11.3B under the four strategies at 8 sequences of 512 tokens per
// GPU in bf16; and T5 11.3B under full sharding at batch 8 and 16 per GPU
// (16 fits an A100 80GB at 8 GPUs only with selective recomputation, which
// redoes no matmul), with an fp32 curve (TF32 matmuls, selective
// recomputation to fit) for the 16- against 32-bit finding.
std::vector<Curve> paper_curves() {
  std::vector<Curve> curves;
  for (const char* config : {"configs/scaling/t5_611m.toml", "configs/scaling/t5_2.28b.toml",
                             "configs/scaling/t5_11.3b.toml"}) {
    for (const std::string& strategy : kPaperStrategies) {
      curves.push_back({"model_scale", config, strategy, 8, "bf16", "none"});
    }
  }
  curves.push_back(
      {"batch_scale", "configs/scaling/t5_11.3b.toml", "full_shard", 8, "bf16", "none"});
  curves.push_back(
      {"batch_scale", "configs/scaling/t5_11.3b.toml", "full_shard", 16, "bf16", "selective"});
  curves.push_back(
      {"batch_scale", "configs/scaling/t5_11.3b.toml", "full_shard", 8, "fp32", "selective"});
  return curves;
}

struct ScaleOptions {
  std::string hardware;
  // A custom grid (any of --configs, --strategies, --batch-per-gpu,
  // --precision given): configs x strategies x batches x precisions;
  // otherwise the paper's curves.
  bool custom = false;
  std::vector<std::string> configs = {"configs/scaling/t5_611m.toml",
                                      "configs/scaling/t5_2.28b.toml",
                                      "configs/scaling/t5_11.3b.toml"};
  std::vector<std::string> strategies = kPaperStrategies;
  std::vector<int> batches = {0};
  std::vector<std::string> precisions = {""};
  std::vector<int> gpus = {8, 16, 32, 64, 128, 256, 512};
  std::vector<int> ranks = {1, 2, 4};
  std::vector<ParallelMode> modes = {ParallelMode::ddp, ParallelMode::zero1, ParallelMode::zero2,
                                     ParallelMode::zero3, ParallelMode::hybrid};
  std::string out;
  std::vector<std::string> overrides;  // section.key=value, for every config
  bool measure = false, plot = true;
  int measure_max_ranks = 4;
  int hybrid_group = 0;
  std::optional<double> rate_dispersion;  // replaces the profile's device.rate_dispersion
  MeasureOptions run;
};

int to_int(const std::string& text, const std::string& option) {
  return static_cast<int>(parse_integer(text, option));
}

std::vector<int> int_list(const std::string& text, const std::string& option) {
  std::vector<int> values;
  for (const std::string& item : split_commas(text)) {
    values.push_back(to_int(item, option));
    LLM_CHECK(values.back() >= 1, "--{}: counts must be at least 1", option);
  }
  return values;
}

std::vector<ParallelMode> mode_list(const std::string& text) {
  std::vector<ParallelMode> modes;
  for (const std::string& item : split_commas(text))
    modes.push_back(parse_enum<ParallelMode>(item, "--modes"));
  return modes;
}

std::vector<Curve> curves_of(const ScaleOptions& o) {
  if (!o.custom) return paper_curves();
  std::vector<Curve> curves;
  for (const std::string& config : o.configs) {
    for (const std::string& strategy : o.strategies) {
      for (int batch : o.batches) {
        for (const std::string& precision : o.precisions) {
          curves.push_back({"custom", config, strategy, batch, precision, ""});
        }
      }
    }
  }
  return curves;
}

// The curve's config (its precision, recomputation and batch per GPU) as it
// runs at `gpus` GPUs under weak scaling: each GPU keeps batch_per_gpu
// sequences in the config's number of micro-batches per step.
Config curve_config(const Curve& curve, const std::vector<std::string>& overrides, int gpus) {
  Config config = config_load(curve.config, overrides);
  if (!curve.precision.empty())
    config.training.precision = parse_enum<Precision>(curve.precision, "precision");
  if (!curve.recompute.empty()) {
    config.training.recompute = parse_enum<Recompute>(curve.recompute, "recompute");
  }
  TrainingConfig& t = config.training;
  LLM_CHECK(t.batch_size % t.micro_batch_size == 0,
            "{}: training.batch_size must be a multiple of micro_batch_size for scaling",
            config.path);
  const int micro_batches = t.batch_size / t.micro_batch_size;
  if (curve.batch_per_gpu > 0) {
    LLM_CHECK(curve.batch_per_gpu % micro_batches == 0,
              "{}: batch {} per GPU does not split into its {} micro-batches", config.path,
              curve.batch_per_gpu, micro_batches);
    t.batch_size = curve.batch_per_gpu;
    t.micro_batch_size = curve.batch_per_gpu / micro_batches;
  }
  t.batch_size *= gpus;
  return config;
}

std::vector<std::string> mode_overrides(const StrategyMode& m) {
  std::vector<std::string> o = {fmt::format("parallel.mode={}", m.mode)};
  if (m.mode == ParallelMode::hybrid)
    o.push_back(fmt::format("parallel.shard_group_size={}", m.shard_group_size));
  return o;
}

void apply_mode(Config& config, const StrategyMode& m) {
  config.parallel.mode = m.mode;
  config.parallel.shard_group_size = m.mode == ParallelMode::hybrid ? m.shard_group_size : 0;
}

struct Row {
  std::string figure = "custom", config, strategy;
  int batch_per_gpu = 0;
  std::string precision, recompute, reduce_dtype;
  StrategyMode mode;
  size_t parameters = 0;
  int gpus = 0;
  bool fits = false;
  size_t bytes_per_gpu = 0, memory_limit = 0;
  StepPrediction predicted;
  std::optional<double> measured_seconds;
};

// One row per point: the curve, TFLOPS per GPU, and the step's parts
// (step = compute + contention + exposed comm + optimizer), then how the
// collectives ran and the memory and traffic behind them, the measurement,
// and the part of compute spent waiting for the slowest GPU with the
// profile's rate dispersion behind it.
void write_csv(const std::string& path, const std::string& hardware, double rate_dispersion,
               const std::vector<Row>& rows) {
  std::ofstream out(path);
  LLM_CHECK(out, "cannot write {}", path);
  out << "config,strategy,gpus,batch_per_gpu,precision,tflops_per_gpu,step_time_s,compute_s,"
         "contention_s,exposed_comm_s,optimizer_s,comm_in_flight_s,overlapped_compute_s,comm_busy_"
         "s,"
         "all_gather_algorithm,reduce_scatter_algorithm,all_reduce_algorithm,figure,hardware,"
         "parameters,mode,shard_group,reduce_dtype,recompute,fits,bytes_per_gpu,memory_limit,"
         "all_gather_sent,reduce_scatter_sent,all_reduce_sent,measured_step_time_s,"
         "measured_tflops_per_gpu,straggler_s,rate_dispersion\n";
  for (const Row& r : rows) {
    const StepPrediction& p = r.predicted;
    auto sent = [&](CollectiveOp op) { return p.traffic[static_cast<int>(op)].sent_bytes; };
    auto algorithm = [&](CollectiveOp op) { return p.algorithm[static_cast<int>(op)]; };
    std::string measured_step, measured_tflops;
    if (r.measured_seconds) {
      measured_step = fmt::format("{:.6g}", *r.measured_seconds);
      measured_tflops = fmt::format("{:.6g}", p.model_flops / r.gpus / *r.measured_seconds / 1e12);
    }
    out << fmt::format(
        "{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},", r.config,
        r.strategy, r.gpus, r.batch_per_gpu, r.precision, p.tflops_per_rank, p.step_seconds,
        p.compute_seconds, p.contention_seconds, p.exposed_comm_seconds, p.optimizer_seconds,
        p.comm_in_flight_seconds, p.overlapped_compute_seconds, p.comm_seconds);
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g},{:.6g}\n",
                       algorithm(CollectiveOp::all_gather), algorithm(CollectiveOp::reduce_scatter),
                       algorithm(CollectiveOp::all_reduce), r.figure, hardware, r.parameters,
                       r.mode.mode, r.mode.shard_group_size, r.reduce_dtype, r.recompute,
                       r.fits ? 1 : 0, r.bytes_per_gpu, r.memory_limit,
                       sent(CollectiveOp::all_gather), sent(CollectiveOp::reduce_scatter),
                       sent(CollectiveOp::all_reduce), measured_step, measured_tflops,
                       p.straggler_seconds, rate_dispersion);
  }
}

// Ranks sharing one machine (step_time) plot step time, not TFLOPS per rank.
void plot(const std::string& csv, const std::string& png, bool step_time) {
  // Debian's interpreter, where python3-matplotlib installs, before any other.
  const char* python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::string command =
      step_time
          ? fmt::format("{} tools/plot_scaling.py --out '{}' --step-time '{}'", python, png, csv)
          : fmt::format("{} tools/plot_scaling.py --out '{}' '{}'", python, png, csv);
  if (run_command(command) == 0) {
    fmt::print("plotted {}\n", png);
  } else {
    fmt::print("could not plot (needs python3-matplotlib: make deps); the CSV is {}\n", csv);
  }
}

// A measurement cache: ddp and full_replication run the same engine mode.
double measured(std::map<std::string, double>& cache, const std::string& config_path,
                const std::vector<std::string>& overrides, int ranks, const MeasureOptions& run) {
  std::string key = fmt::format("{}|{}", config_path, ranks);
  for (const std::string& o : overrides) key += "|" + o;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::string what = config_path;
  for (const std::string& o : overrides) what += " --" + o;
  fmt::print(stderr, "measuring {} on {} rank(s) ...\n", what, ranks);
  return cache[key] = measure_step_seconds(config_path, overrides, ranks, run);
}

// What a row knows of `c` (its mode applied) at `gpus` ranks before any
// measurement: the run's shape, memory per GPU by the planner against the
// profile's, and the step predicted by the throughput model.
void plan_row(Row& r, const Config& c, int gpus, const HardwareProfile& hw,
              const ThroughputOptions& options = {}) {
  r.gpus = gpus;
  r.parameters = layout_build(c.model).total_numel;
  r.batch_per_gpu = c.training.batch_size / gpus;
  r.precision = to_string(c.precision());
  r.recompute = to_string(c.training.recompute);
  r.reduce_dtype = to_string(c.parallel.reduce_dtype);
  r.bytes_per_gpu =
      memory_plan(c, sharding_plan(c.parallel, data_parallel_size(c.parallel, gpus))).total();
  r.memory_limit = hw.rank_memory_bytes(std::min(gpus, hw.node.devices_per_node));
  r.fits = r.bytes_per_gpu <= r.memory_limit;
  r.predicted = throughput_predict(c, gpus, hw, options);
}

// The row of one curve at one GPU count: memory by the planner, step time
// by the throughput model, and (with --measure, where it can run here) the
// measured step time.
Row sweep_point(const ScaleOptions& o, const HardwareProfile& hw, const Curve& curve, int gpus,
                int node, std::map<std::string, double>& cache) {
  Row r;
  r.figure = curve.figure;
  r.config = std::filesystem::path(curve.config).stem().string();
  r.strategy = curve.strategy;
  r.mode = strategy_mode(curve.strategy, gpus, node);
  Config c = curve_config(curve, o.overrides, gpus);
  apply_mode(c, r.mode);
  ThroughputOptions options;
  if (r.mode.ddp_buckets) options.ddp_bucket_bytes = kDdpBucketBytes;
  plan_row(r, c, gpus, hw, options);
  // Runnable here: within the rank limit and, by the profile (which
  // describes the machine measured on), within memory.
  if (o.measure && r.fits && gpus <= o.measure_max_ranks) {
    std::vector<std::string> overrides = o.overrides;
    for (const std::string& m : mode_overrides(r.mode)) overrides.push_back(m);
    overrides.push_back(fmt::format("training.precision={}", r.precision));
    overrides.push_back(fmt::format("training.recompute={}", r.recompute));
    overrides.push_back(fmt::format("training.micro_batch_size={}", c.training.micro_batch_size));
    overrides.push_back(fmt::format("training.batch_size={}", c.training.batch_size));
    try {
      r.measured_seconds = measured(cache, curve.config, overrides, gpus, o.run);
    } catch (const Error& e) {
      fmt::print(stderr, "not measured: {}\n", e.what());
    }
  }
  return r;
}

// The profile, with --rate-dispersion in place of its device.rate_dispersion.
HardwareProfile scale_hardware(const ScaleOptions& o) {
  HardwareProfile hw = hardware_load(o.hardware);
  if (o.rate_dispersion) hw.device.rate_dispersion = *o.rate_dispersion;
  return hw;
}

void run_sweep(const ScaleOptions& o) {
  const HardwareProfile hw = scale_hardware(o);
  const int node = o.hybrid_group > 0 ? o.hybrid_group : hw.node.devices_per_node;
  const std::vector<Curve> curves = curves_of(o);
  for (const Curve& curve : curves) {
    for (int gpus : o.gpus)
      strategy_mode(curve.strategy, gpus, node);  // names and counts, before any output
  }
  std::filesystem::create_directories(o.out);
  std::map<std::string, double> cache;
  std::vector<Row> rows;
  fmt::print(
      "scaling on {} ({}): TFLOPS per GPU (model FLOPs, no recomputation); OOM = "
      "does not fit {} per GPU\n",
      hw.name, o.hardware, format_bytes(static_cast<double>(hw.rank_memory_bytes(1))));
  std::string heading;
  for (const Curve& curve : curves) {
    const std::string block = curve.figure + "|" + curve.config;
    if (block != heading) {
      heading = block;
      fmt::print("\n{}: {}\n{:<34}", curve.figure, curve.config, "strategy, batch/GPU, precision");
      for (int g : o.gpus) fmt::print(" {:>9}", g);
      fmt::print("\n");
    }
    bool labelled = false;
    for (int gpus : o.gpus) {
      Row r = sweep_point(o, hw, curve, gpus, node, cache);
      if (!labelled) {
        fmt::print("{:<34}", fmt::format("{}, {}, {} ({})", r.strategy, r.batch_per_gpu,
                                         r.precision, r.recompute));
        labelled = true;
      }
      std::string cell = r.fits ? fmt::format("{:.3g}", r.predicted.tflops_per_rank) : "OOM";
      if (r.measured_seconds) {
        cell += fmt::format("/{:.3g}", r.predicted.model_flops / gpus / *r.measured_seconds / 1e12);
      }
      fmt::print(" {:>9}", cell);
      std::fflush(stdout);
      rows.push_back(r);
    }
    fmt::print("\n");
  }
  if (o.measure) fmt::print("(predicted/measured where a point was run here)\n");
  const std::string csv = (std::filesystem::path(o.out) / "scaling.csv").string();
  write_csv(csv, std::filesystem::path(o.hardware).stem().string(), hw.device.rate_dispersion,
            rows);
  fmt::print("\nwrote {}\n", csv);
  if (o.plot)
    plot(csv, (std::filesystem::path(o.out) / "scaling.png").string(), hw.device.shared_by_node);
}

// The 1, 5 and 15 minute load averages: how busy the machine was.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return fmt::format("{} {} {}", one, five, fifteen);
}

// The validation table as Markdown, for docs/throughput_model.md.
void write_validation_markdown(const std::string& path, const std::string& hardware,
                               const std::string& load_at_start, const std::vector<Row>& rows) {
  std::ofstream out(path);
  LLM_CHECK(out, "cannot write {}", path);
  out << fmt::format("Predicted with `{}`; load average {} at the start, {} at the end.\n\n",
                     hardware, load_at_start, load_average());
  out << "| config | ranks | mode | predicted ms | measured ms | error | predicted compute / "
         "contention / optimizer / exposed comm ms |\n"
         "|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    const StepPrediction& p = r.predicted;
    out << fmt::format(
        "| {} | {} | {} | {:.1f} | {:.1f} | {:+.0f}% | {:.1f} / {:.1f} / {:.1f} / {:.1f} |\n",
        r.config, r.gpus, r.strategy, p.step_seconds * 1e3, *r.measured_seconds * 1e3,
        100 * (p.step_seconds / *r.measured_seconds - 1), p.compute_seconds * 1e3,
        p.contention_seconds * 1e3, p.optimizer_seconds * 1e3, p.exposed_comm_seconds * 1e3);
  }
}

void run_validation(const ScaleOptions& o) {
  const HardwareProfile hw = scale_hardware(o);
  std::filesystem::create_directories(o.out);
  std::map<std::string, double> cache;
  std::vector<Row> rows;
  fmt::print("validation on this machine against {}: predicted vs measured step time\n",
             o.hardware);
  fmt::print("{:<12} {:>5} {:<10} {:>13} {:>13} {:>8}   {}\n", "config", "ranks", "mode",
             "predicted ms", "measured ms", "error",
             "predicted parts (compute / contention / optimizer / exposed comm ms)");
  std::map<std::string, std::pair<double, int>> errors;  // config -> (sum of |error|, points)
  const std::string load_at_start = load_average();
  for (const std::string& path : o.configs) {
    const Config base = config_load(path, o.overrides);
    for (int ranks : o.ranks) {
      for (ParallelMode mode : o.modes) {
        StrategyMode m{mode, 0, false};
        if (mode == ParallelMode::hybrid) {
          if (ranks < 4 || ranks % 2 != 0) continue;  // needs two groups of two or more
          m.shard_group_size = ranks / 2;
        }
        Config c = base;
        apply_mode(c, m);
        if (c.training.batch_size % (c.training.micro_batch_size * ranks) != 0) {
          fmt::print(
              "{:<12} {:>5} {:<10} skipped: batch {} does not split over {} ranks of micro-batch "
              "{}\n",
              c.name, ranks, mode, c.training.batch_size, ranks, c.training.micro_batch_size);
          continue;
        }
        Row r;
        r.config = c.name;
        r.strategy = mode == ParallelMode::hybrid ? fmt::format("hybrid/{}", m.shard_group_size)
                                                  : to_string(mode);
        r.mode = m;
        plan_row(r, c, ranks, hw);
        std::vector<std::string> overrides = o.overrides;
        for (const std::string& mo : mode_overrides(m)) overrides.push_back(mo);
        r.measured_seconds = measured(cache, path, overrides, ranks, o.run);
        const double error = r.predicted.step_seconds / *r.measured_seconds - 1.0;
        errors[r.config].first += std::abs(error);
        errors[r.config].second += 1;
        fmt::print(
            "{:<12} {:>5} {:<10} {:>13.1f} {:>13.1f} {:>+7.1f}%   {:.1f} / {:.1f} / {:.1f} / "
            "{:.1f}\n",
            r.config, ranks, r.strategy, r.predicted.step_seconds * 1e3, *r.measured_seconds * 1e3,
            100 * error, r.predicted.compute_seconds * 1e3, r.predicted.contention_seconds * 1e3,
            r.predicted.optimizer_seconds * 1e3, r.predicted.exposed_comm_seconds * 1e3);
        std::fflush(stdout);
        rows.push_back(r);
      }
    }
  }
  for (const auto& [config, e] : errors) {
    fmt::print("{}: mean absolute error over {} points: {:.1f}%\n", config, e.second,
               100 * e.first / e.second);
  }
  const std::string csv = (std::filesystem::path(o.out) / "validation.csv").string();
  write_csv(csv, std::filesystem::path(o.hardware).stem().string(), hw.device.rate_dispersion,
            rows);
  const std::string markdown = (std::filesystem::path(o.out) / "validation.md").string();
  write_validation_markdown(markdown, o.hardware, load_at_start, rows);
  fmt::print("wrote {} and {}\n", csv, markdown);
}

}  // namespace

StrategyMode strategy_mode(const std::string& strategy, int gpus, int devices_per_node) {
  if (strategy == "ddp") return {ParallelMode::ddp, 0, true};
  if (strategy == "full_replication") return {ParallelMode::ddp, 0, false};
  if (strategy == "full_shard") return {ParallelMode::zero3, 0, false};
  if (strategy == "hybrid") {
    // Shard within a node; a world that fits in one node is one shard group.
    int group = std::min(gpus, devices_per_node);
    LLM_CHECK(gpus % group == 0, "hybrid: {} GPUs are not whole nodes of {}", gpus, group);
    return {ParallelMode::hybrid, group, false};
  }
  LLM_FAIL("unknown strategy '{}' (ddp, full_replication, hybrid, full_shard)", strategy);
}

int scale_command(const std::vector<std::pair<std::string, std::string>>& options,
                  const std::vector<std::string>& overrides) {
  ScaleOptions o;
  o.overrides = overrides;
  bool validate = false, calibrate = false, bench = false, configs_given = false;
  std::string calibration_config, out;
  for (const auto& [key, value] : options) {
    if (key == "hardware")
      o.hardware = value;
    else if (key == "configs")
      o.configs = split_commas(value), configs_given = true, o.custom = true;
    else if (key == "strategies")
      o.strategies = split_commas(value), o.custom = true;
    else if (key == "batch-per-gpu")
      o.batches = int_list(value, key), o.custom = true;
    else if (key == "precision")
      o.precisions = split_commas(value), o.custom = true;
    else if (key == "gpus")
      o.gpus = int_list(value, key);
    else if (key == "ranks")
      o.ranks = int_list(value, key);
    else if (key == "modes")
      o.modes = mode_list(value);
    else if (key == "out")
      out = value;
    else if (key == "measure")
      o.measure = true;
    else if (key == "no-plot")
      o.plot = false;
    else if (key == "measure-max-ranks")
      o.measure_max_ranks = to_int(value, key);
    else if (key == "steps")
      o.run.steps = to_int(value, key);
    else if (key == "repeats")
      o.run.repeats = to_int(value, key);
    else if (key == "launcher")
      o.run.launcher = value;
    else if (key == "train-binary")
      o.run.train_binary = value;
    else if (key == "hybrid-group")
      o.hybrid_group = to_int(value, key);
    else if (key == "rate-dispersion")
      o.rate_dispersion = parse_number(value, key, 0, 1);
    else if (key == "validate")
      validate = true;
    else if (key == "calibrate")
      calibrate = true;
    else if (key == "config")
      calibration_config = value;
    else if (key == "comm-bench")
      bench = true;
    else
      LLM_FAIL("./train scale: unknown option --{} (see ./train --help)", key);
  }
  LLM_CHECK(validate + calibrate + bench <= 1,
            "./train scale: choose one of --validate, --calibrate");
  if (bench) {
    comm_bench(comm_world());
    return 0;
  }
  if (calibrate) {
    CalibrationOptions c;
    if (!out.empty()) c.out = out;
    if (!calibration_config.empty()) c.config = calibration_config;
    c.measure = o.run;
    calibrate_machine(c);
    return 0;
  }
  if (validate) {
    if (o.hardware.empty()) o.hardware = "cost_models/hardware/cpu_dev_vm.toml";
    if (!configs_given) o.configs = {"configs/tiny.toml", "configs/scale_cpu.toml"};
    o.out = out.empty() ? "results/validation" : out;
    run_validation(o);
    return 0;
  }
  if (o.hardware.empty()) o.hardware = "cost_models/hardware/a100_80gb_roce.toml";
  o.out = out.empty() ? "results/scaling" : out;
  run_sweep(o);
  return 0;
}

}  // namespace llm
