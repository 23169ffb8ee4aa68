// `./train scale`: the sweep, its CSV and plot, validation against real runs,
// and option parsing (see scaling.h).
#include "planning/scaling.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "planning/calibration.h"
#include "runtime/cli_values.h"
#include "runtime/error.h"
#include "planning/hardware_profile.h"
#include "planning/measure_run.h"
#include "runtime/system.h"
#include "planning/throughput_model.h"
#include "trainer/trainer.h"
#include "model/layout.h"
#include "parallel/comm.h"
#include "parallel/topology.h"

namespace llm {
namespace {

constexpr size_t kDdpBucketBytes = 25u << 20;  // PyTorch DDP's bucket_cap_mb default

struct ScaleOptions {
  std::string hardware;
  std::vector<std::string> configs = {"configs/t5_611m.toml", "configs/t5_2.28b.toml",
                                      "configs/t5_11.3b.toml"};
  std::vector<std::string> strategies = {"ddp", "full_replication", "hybrid", "full_shard"};
  std::vector<int> gpus = {8, 16, 32, 64, 128, 256, 512};
  std::vector<int> ranks = {1, 2, 4};
  std::vector<ParallelMode> modes = {ParallelMode::ddp, ParallelMode::zero1, ParallelMode::zero2,
                                     ParallelMode::zero3, ParallelMode::hybrid};
  std::string out;
  std::vector<std::string> overrides;  // section.key=value, for every config
  bool measure = false, plot = true;
  int measure_max_ranks = 4;
  int hybrid_group = 0;
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
  for (const std::string& item : split_commas(text)) modes.push_back(parse_enum<ParallelMode>(item, "--modes"));
  return modes;
}

// The config as it runs at `gpus` GPUs under weak scaling: each GPU keeps
// batch_size / micro_batch_size micro-batches per step.
Config weak_scaled(Config config, int gpus) {
  const TrainingConfig& t = config.training;
  LLM_CHECK(t.batch_size % t.micro_batch_size == 0,
            "{}: training.batch_size must be a multiple of micro_batch_size for scaling", config.path);
  config.training.batch_size = t.batch_size * gpus;
  return config;
}

std::vector<std::string> mode_overrides(const StrategyMode& m) {
  std::vector<std::string> o = {fmt::format("parallel.mode={}", m.mode)};
  if (m.mode == ParallelMode::hybrid) o.push_back(fmt::format("parallel.shard_group_size={}", m.shard_group_size));
  return o;
}

void apply_mode(Config& config, const StrategyMode& m) {
  config.parallel.mode = m.mode;
  config.parallel.shard_group_size = m.mode == ParallelMode::hybrid ? m.shard_group_size : 0;
}

struct Row {
  std::string config, strategy;
  StrategyMode mode;
  size_t parameters = 0;
  int gpus = 0;
  bool fits = false;
  size_t bytes_per_gpu = 0, memory_limit = 0;
  StepPrediction predicted;
  std::optional<double> measured_seconds;
};

void write_csv(const std::string& path, const std::string& hardware, const std::vector<Row>& rows) {
  std::ofstream out(path);
  LLM_CHECK(out, "cannot write {}", path);
  out << "hardware,config,parameters,strategy,mode,shard_group,gpus,fits,bytes_per_gpu,"
         "memory_limit,step_time_s,compute_s,optimizer_s,comm_busy_s,exposed_comm_s,"
         "tflops_per_gpu,all_gather_sent,reduce_scatter_sent,all_reduce_sent,"
         "measured_step_time_s,measured_tflops_per_gpu\n";
  for (const Row& r : rows) {
    const StepPrediction& p = r.predicted;
    auto sent = [&](CollectiveOp op) { return p.traffic[static_cast<int>(op)].sent_bytes; };
    std::string measured_step, measured_tflops;
    if (r.measured_seconds) {
      measured_step = fmt::format("{:.6g}", *r.measured_seconds);
      measured_tflops = fmt::format("{:.6g}", p.model_flops / r.gpus / *r.measured_seconds / 1e12);
    }
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{},{}\n",
                       hardware, r.config, r.parameters, r.strategy, r.mode.mode,
                       r.mode.shard_group_size, r.gpus, r.fits ? 1 : 0, r.bytes_per_gpu,
                       r.memory_limit, p.step_seconds, p.compute_seconds, p.optimizer_seconds,
                       p.comm_seconds, p.exposed_comm_seconds, p.tflops_per_rank,
                       sent(CollectiveOp::all_gather), sent(CollectiveOp::reduce_scatter),
                       sent(CollectiveOp::all_reduce), measured_step, measured_tflops);
  }
}

void plot(const std::string& csv, const std::string& png) {
  // Debian's interpreter, where python3-matplotlib installs, before any other.
  const char* python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::string command = fmt::format("{} tools/plot_scaling.py --out '{}' '{}'", python, png, csv);
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

void run_sweep(const ScaleOptions& o) {
  const HardwareProfile hw = hardware_load(o.hardware);
  const int node = o.hybrid_group > 0 ? o.hybrid_group : hw.node.devices_per_node;
  for (const std::string& strategy : o.strategies) {
    for (int gpus : o.gpus) strategy_mode(strategy, gpus, node);  // names and counts, before any output
  }
  std::filesystem::create_directories(o.out);
  std::map<std::string, double> cache;
  std::vector<Row> rows;
  fmt::print("scaling on {} ({}): TFLOPS per GPU (model FLOPs, no recomputation); OOM = "
             "does not fit {} per GPU\n",
             hw.name, o.hardware, format_bytes(static_cast<double>(hw.rank_memory_bytes(1))));
  for (const std::string& path : o.configs) {
    const Config base = config_load(path, o.overrides);
    const size_t parameters = layout_build(base.model).total_numel;
    fmt::print("\n{} ({:.3g}B parameters, batch {} x {} tokens per GPU)\n{:<18}", path, parameters / 1e9,
               base.training.batch_size, base.training.seq_len, "strategy \\ GPUs");
    for (int g : o.gpus) fmt::print(" {:>9}", g);
    fmt::print("\n");
    for (const std::string& strategy : o.strategies) {
      fmt::print("{:<18}", strategy);
      for (int gpus : o.gpus) {
        Row r;
        r.config = std::filesystem::path(path).stem().string();
        r.strategy = strategy;
        r.parameters = parameters;
        r.gpus = gpus;
        r.mode = strategy_mode(strategy, gpus, node);
        Config c = weak_scaled(base, gpus);
        apply_mode(c, r.mode);
        const int ranks_per_node = std::min(gpus, hw.node.devices_per_node);
        r.bytes_per_gpu =
            memory_plan(c, sharding_plan(c.parallel, data_parallel_size(c.parallel, gpus))).total();
        r.memory_limit = hw.rank_memory_bytes(ranks_per_node);
        r.fits = r.bytes_per_gpu <= r.memory_limit;
        ThroughputOptions options;
        if (r.mode.ddp_buckets) options.ddp_bucket_bytes = kDdpBucketBytes;
        r.predicted = throughput_predict(c, gpus, hw, options);
        // Runnable here: within the rank limit and, by the profile (which
        // describes the machine measured on), within memory.
        if (o.measure && r.fits && gpus <= o.measure_max_ranks) {
          std::vector<std::string> overrides = o.overrides;
          for (const std::string& m : mode_overrides(r.mode)) overrides.push_back(m);
          overrides.push_back(fmt::format("training.batch_size={}", c.training.batch_size));
          try {
            r.measured_seconds = measured(cache, path, overrides, gpus, o.run);
          } catch (const Error& e) {
            fmt::print(stderr, "not measured: {}\n", e.what());
          }
        }
        std::string cell = r.fits ? fmt::format("{:.3g}", r.predicted.tflops_per_rank) : "OOM";
        if (r.measured_seconds) {
          cell += fmt::format("/{:.3g}", r.predicted.model_flops / gpus / *r.measured_seconds / 1e12);
        }
        fmt::print(" {:>9}", cell);
        rows.push_back(r);
      }
      fmt::print("\n");
    }
  }
  if (o.measure) fmt::print("(predicted/measured where a point was run here)\n");
  const std::string csv = (std::filesystem::path(o.out) / "scaling.csv").string();
  write_csv(csv, std::filesystem::path(o.hardware).stem().string(), rows);
  fmt::print("\nwrote {}\n", csv);
  if (o.plot) plot(csv, (std::filesystem::path(o.out) / "scaling.png").string());
}

// The 1, 5 and 15 minute load averages: how busy the machine was.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return fmt::format("{} {} {}", one, five, fifteen);
}

// The validation table as Markdown, for the README.
void write_validation_markdown(const std::string& path, const std::string& hardware,
                               const std::string& load_at_start, const std::vector<Row>& rows) {
  std::ofstream out(path);
  LLM_CHECK(out, "cannot write {}", path);
  out << fmt::format("Predicted with `{}`; load average {} at the start, {} at the end.\n\n",
                     hardware, load_at_start, load_average());
  out << "| config | ranks | mode | predicted ms | measured ms | error | predicted compute / optimizer / exposed comm ms |\n"
         "|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    const StepPrediction& p = r.predicted;
    out << fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:+.0f}% | {:.1f} / {:.1f} / {:.1f} |\n", r.config,
                       r.gpus, r.strategy, p.step_seconds * 1e3, *r.measured_seconds * 1e3,
                       100 * (p.step_seconds / *r.measured_seconds - 1), p.compute_seconds * 1e3,
                       p.optimizer_seconds * 1e3, p.exposed_comm_seconds * 1e3);
  }
}

void run_validation(const ScaleOptions& o) {
  const HardwareProfile hw = hardware_load(o.hardware);
  std::filesystem::create_directories(o.out);
  std::map<std::string, double> cache;
  std::vector<Row> rows;
  fmt::print("validation on this machine against {}: predicted vs measured step time\n", o.hardware);
  fmt::print("{:<12} {:>5} {:<10} {:>13} {:>13} {:>8}   {}\n", "config", "ranks", "mode",
             "predicted ms", "measured ms", "error", "predicted parts (compute / optimizer / exposed comm ms)");
  double sum_abs_error = 0;
  int points = 0;
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
          fmt::print("{:<12} {:>5} {:<10} skipped: batch {} does not split over {} ranks of micro-batch {}\n",
                     c.name, ranks, mode, c.training.batch_size, ranks, c.training.micro_batch_size);
          continue;
        }
        Row r;
        r.config = c.name;
        r.strategy = mode == ParallelMode::hybrid ? fmt::format("hybrid/{}", m.shard_group_size) : to_string(mode);
        r.mode = m;
        r.gpus = ranks;
        r.parameters = layout_build(c.model).total_numel;
        r.bytes_per_gpu =
        memory_plan(c, sharding_plan(c.parallel, data_parallel_size(c.parallel, ranks))).total();
        r.memory_limit = hw.rank_memory_bytes(std::min(ranks, hw.node.devices_per_node));
        r.fits = r.bytes_per_gpu <= r.memory_limit;
        r.predicted = throughput_predict(c, ranks, hw);
        std::vector<std::string> overrides = o.overrides;
        for (const std::string& mo : mode_overrides(m)) overrides.push_back(mo);
        r.measured_seconds = measured(cache, path, overrides, ranks, o.run);
        const double error = r.predicted.step_seconds / *r.measured_seconds - 1.0;
        sum_abs_error += std::abs(error);
        ++points;
        fmt::print("{:<12} {:>5} {:<10} {:>13.1f} {:>13.1f} {:>+7.1f}%   {:.1f} / {:.1f} / {:.1f}\n",
                   r.config, ranks, r.strategy, r.predicted.step_seconds * 1e3,
                   *r.measured_seconds * 1e3, 100 * error, r.predicted.compute_seconds * 1e3,
                   r.predicted.optimizer_seconds * 1e3, r.predicted.exposed_comm_seconds * 1e3);
        std::fflush(stdout);
        rows.push_back(r);
      }
    }
  }
  if (points > 0) fmt::print("mean absolute error over {} points: {:.1f}%\n", points, 100 * sum_abs_error / points);
  const std::string csv = (std::filesystem::path(o.out) / "validation.csv").string();
  write_csv(csv, std::filesystem::path(o.hardware).stem().string(), rows);
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
    if (key == "hardware") o.hardware = value;
    else if (key == "configs") o.configs = split_commas(value), configs_given = true;
    else if (key == "strategies") o.strategies = split_commas(value);
    else if (key == "gpus") o.gpus = int_list(value, key);
    else if (key == "ranks") o.ranks = int_list(value, key);
    else if (key == "modes") o.modes = mode_list(value);
    else if (key == "out") out = value;
    else if (key == "measure") o.measure = true;
    else if (key == "no-plot") o.plot = false;
    else if (key == "measure-max-ranks") o.measure_max_ranks = to_int(value, key);
    else if (key == "steps") o.run.steps = to_int(value, key);
    else if (key == "launcher") o.run.launcher = value;
    else if (key == "train-binary") o.run.train_binary = value;
    else if (key == "hybrid-group") o.hybrid_group = to_int(value, key);
    else if (key == "validate") validate = true;
    else if (key == "calibrate") calibrate = true;
    else if (key == "config") calibration_config = value;
    else if (key == "comm-bench") bench = true;
    else LLM_FAIL("./train scale: unknown option --{} (see ./train --help)", key);
  }
  LLM_CHECK(validate + calibrate + bench <= 1, "./train scale: choose one of --validate, --calibrate");
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
    if (o.hardware.empty()) o.hardware = "planning/hardware/cpu_dev_vm.toml";
    if (!configs_given) o.configs = {"configs/tiny.toml", "configs/scale_cpu.toml"};
    o.out = out.empty() ? "results/validation" : out;
    run_validation(o);
    return 0;
  }
  if (o.hardware.empty()) o.hardware = "planning/hardware/a100_80gb_roce.toml";
  o.out = out.empty() ? "results/scaling" : out;
  run_sweep(o);
  return 0;
}

}  // namespace llm
