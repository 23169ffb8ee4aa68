// `./train bench`: tokens/s and achieved GFLOP/s of a training step.
#include "commands/benchmark.h"

#include <fmt/format.h>
#include <omp.h>

#include <unistd.h>

#include <algorithm>

#include <chrono>
#include <filesystem>
#include <memory>
#include <vector>

#include "base/progress.h"
#include "base/rng.h"
#include "base/system.h"
#include "schema/config_validate.h"
#include "trainer/trainer.h"
#include "data/shard.h"
#include "model/flops.h"
#include "model/kernels/cpu_gemm_rate.h"
#include "model/op_profile.h"
#include "parallel/pipeline_schedule.h"

namespace llm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A trainer on synthetic uniform tokens (throughput does not depend on the
// text), on `backend` when given; the shard file only lives while the loader
// opens it.
std::unique_ptr<Trainer> synthetic_trainer(Config config, Group& world,
                                           const Backend* backend = nullptr) {
  const TrainingConfig& t = config.training;
  std::vector<uint32_t> tokens(static_cast<size_t>(t.batch_size) * (t.seq_len + 1));
  Rng rng(static_cast<uint64_t>(t.seed));
  for (uint32_t& token : tokens)
    token = static_cast<uint32_t>(rng.next_below(config.model.vocab_size));
  std::filesystem::path shard = std::filesystem::temp_directory_path() /
                                fmt::format("llm_bench_{}.bin", static_cast<long>(getpid()));
  shard_write(shard.string(), tokens, config.model.vocab_size);
  config.data.train = shard.string();
  config.data.val = "";
  config.data.tokenizer = "";  // nothing is sampled: no tokenizer to load
  config.training.sample_tokens = 0;
  config.logging.metrics = false;
  auto trainer = std::make_unique<Trainer>(config, world, backend);
  std::filesystem::remove(shard);
  return trainer;
}

// Rank 0's transient count of a benchmark's steps (the row's result replaces it).
ProgressOptions step_counter(Trainer& trainer) {
  ProgressOptions options;
  options.enabled = trainer.topology().world.rank() == 0;
  options.item_name = "steps";
  options.style = ProgressStyle::transient;
  options.show_after = 1;
  return options;
}

// Seconds per step over `steps` steps after one warm-up step (slowest rank),
// counted on rank 0's terminal as `label` while they run (the row's result
// replaces the line); `waited` (when given) receives this rank's mean wait per
// counted step for the neighbouring pipeline stages.
double time_steps(Trainer& trainer, int steps, const std::string& label, double* waited = nullptr) {
  Progress progress(label, static_cast<uint64_t>(steps) + 1, step_counter(trainer));
  trainer.train_step(0);
  progress.add(1);
  trainer.topology().world.barrier();
  auto start = Clock::now();
  double wait = 0;
  for (int s = 1; s <= steps; ++s) {
    wait += trainer.train_step(s).pipeline_wait_seconds;
    progress.add(1);
  }
  progress.finish();
  trainer.topology().world.barrier();
  if (waited) *waited = wait / steps;
  return seconds_since(start) / steps;
}

// `steps` more steps, each between the profile's begin_step and end_step (the
// trainer runs on its profiled backend), counted on rank 0's terminal.
void profile_steps(Trainer& trainer, OpProfile& profile, int steps) {
  Progress progress("  profiling", static_cast<uint64_t>(steps), step_counter(trainer));
  for (int s = 1; s <= steps; ++s) {
    profile.begin_step();
    trainer.train_step(s);
    profile.end_step();
    progress.add(1);
  }
  progress.finish();
}

// The op table: the ops by time, then their sum against the measured step.
void print_op_profile(const OpProfile& profile, bool gpu, int world_size) {
  const int steps = profile.steps();
  const double step_ms = profile.step_seconds() * 1e3 / steps;
  const double op_ms = profile.op_seconds() * 1e3 / steps;
  const double rate_unit = gpu ? 1e12 : 1e9;  // TFLOP/s on a GPU, GFLOP/s on the CPU
  fmt::print("  op profile{}, {} more steps on {}:\n", world_size > 1 ? " of rank 0" : "", steps,
             !gpu            ? "the host clock"
             : kCudaEmulated ? "the CUDA emulation (CPU times of the emulated kernels, not a GPU's)"
                             : "CUDA events on the compute stream");
  fmt::print("  {:<30} {:>10} {:>10} {:>7} {:>9}\n", "op", "calls/step", "ms/step", "% step",
             gpu ? "TFLOP/s" : "GFLOP/s");
  for (const OpTotal& op : profile.totals()) {
    const std::string calls = op.calls % steps == 0
                                  ? fmt::format("{}", op.calls / steps)
                                  : fmt::format("{:.1f}", static_cast<double>(op.calls) / steps);
    const std::string rate = op.flops > 0 && op.seconds > 0
                                 ? fmt::format("{:.4g}", op.flops / op.seconds / rate_unit)
                                 : "-";
    const double ms = op.seconds * 1e3 / steps;
    fmt::print("  {:<30} {:>10} {:>10.3f} {:>6.1f}% {:>9}\n", op.name, calls, ms,
               100 * ms / step_ms, rate);
  }
  fmt::print("  {:<30} {:>10} {:>10.3f} {:>6.1f}%\n", "all ops", "", op_ms, 100 * op_ms / step_ms);
  fmt::print("  {:<30} {:>10} {:>10.3f} {:>6.1f}%\n", "outside ops", "", step_ms - op_ms,
             100 * (step_ms - op_ms) / step_ms);
  fmt::print("  {:<30} {:>10} {:>10.3f} {:>6.1f}%\n", "step (measured)", "", step_ms, 100.0);
  fmt::print(
      "  an op's time runs from the previous op's end (or the step's start) to its own: its work\n"
      "  and any wait before it (launch gap, host work, copies, collectives); outside ops: the\n"
      "  rest of the measured step (after its last op; the host's latency at its start and end,\n"
      "  where each profiled step waits for the device)\n");
}

}  // namespace

void benchmark_run(Config config, Group& world, int steps, double peak_tflops, bool profile_ops) {
  const TrainingConfig& t = config.training;
  const bool gpu = config.device() == Device::cuda;
  // With profile_ops the trainer runs on the profiled backend throughout; its
  // ops mark nothing outside the profile's steps.
  std::unique_ptr<OpProfile> profile;
  Backend profiled_backend{};
  if (profile_ops) {
    profile = std::make_unique<OpProfile>(config.device());
    profiled_backend = profiled(backend_for(config.device(), t.attention), *profile);
  }
  std::unique_ptr<Trainer> trainer =
      synthetic_trainer(config, world, profile ? &profiled_backend : nullptr);
  const bool leader = world.rank() == 0;
  if (leader) {
    fmt::print("benchmark {} ({} parameters, {} rank(s) on {}, mode {}, {})\n", config.path,
               trainer->model().layout().total_numel, world.size(),
               gpu ? "CUDA" : fmt::format("{} CPU threads", omp_get_max_threads()),
               trainer->topology().plan.mode, t.precision);
    fmt::print("  batch {} x {} tokens, micro-batch {}\n", t.batch_size, t.seq_len,
               t.micro_batch_size);
  }
  // The reference rate: the GPU's dense peak, or this CPU's sgemm, measured
  // before and after the timed steps and the better kept (a shared machine's
  // burst of other work then has to cover both to lower it).
  double reference = gpu ? peak_tflops * 1e3 : measure_gemm_gflops(2048, 10);
  double seconds = time_steps(*trainer, steps, "  timing");
  if (!gpu) reference = std::max(reference, measure_gemm_gflops(2048, 10));
  if (profile) profile_steps(*trainer, *profile, steps);

  if (!leader) return;
  if (gpu) {
    fmt::print("  peak (--peak-tflops)   {:9.1f} TFLOP/s per GPU\n", peak_tflops);
  } else {
    fmt::print(
        "  sgemm 2048^3 rate      {:9.1f} GFLOP/s per rank (best before and after the steps)\n",
        reference);
  }
  const ModelFlops flops = step_flops(config);
  double step_tokens = static_cast<double>(t.batch_size) * t.seq_len;
  double achieved = flops.total() / seconds / 1e9 / world.size();
  fmt::print("  step time              {:9.1f} ms\n", seconds * 1e3);
  fmt::print("  tokens/s               {:9.0f}\n", step_tokens / seconds);
  fmt::print("  FLOPs per step         {:9.3g} (matmul {:.3g}, attention {:.3g})\n", flops.total(),
             flops.matmul, flops.attention);
  fmt::print("  achieved               {:9.1f} GFLOP/s per rank = {:.1f}% of the {}\n", achieved,
             100.0 * achieved / reference, gpu ? "peak (MFU)" : "sgemm rate");
  fmt::print("  activations {}, model state {}\n",
             format_bytes(trainer->model().activation_bytes().total),
             format_bytes(trainer->engine().bytes().total()));
  if (profile) print_op_profile(*profile, gpu, world.size());
}

void benchmark_modes(Config config, Group& world, int steps) {
  const int n = world.size();
  struct Row {
    int tensor_parallel, pipeline_parallel;
    ParallelMode mode;
    int shard_group_size;
  };
  std::vector<Row> rows = {{1, 1, ParallelMode::ddp, 0},
                           {1, 1, ParallelMode::zero1, 0},
                           {1, 1, ParallelMode::zero2, 0},
                           {1, 1, ParallelMode::zero3, 0}};
  if (n >= 4 && n % 2 == 0) rows.push_back({1, 1, ParallelMode::hybrid, n / 2});
  // Tensor parallelism over pairs of ranks, where the world and the model split in two.
  if (n % 2 == 0 && !tensor_parallel_uneven_split(config, 2).key) {
    rows.push_back({2, 1, ParallelMode::ddp, 0});
    rows.push_back({2, 1, ParallelMode::zero3, 0});
  }
  // Two pipeline stages, where the world splits in two and the LM head is untied.
  const bool pipelines = n % 2 == 0 && config.model.n_layers >= 2 && !config.model.tie_embeddings;
  if (pipelines) {
    rows.push_back({1, 2, ParallelMode::ddp, 0});
    rows.push_back({1, 2, ParallelMode::zero3, 0});
    if (n % 4 == 0 && !tensor_parallel_uneven_split(config, 2).key) {
      rows.push_back({2, 2, ParallelMode::zero3, 0});
    }
  }
  const ParameterLayout layout = layout_build(config.model);
  const double model_bytes = 4.0 * layout.total_numel;
  if (world.rank() == 0) {
    fmt::print("modes benchmark {}: {} parameters ({}), {} ranks, batch {} x {}, micro-batch {}\n",
               config.path, layout.total_numel, format_bytes(model_bytes), n,
               config.training.batch_size, config.training.seq_len,
               config.training.micro_batch_size);
    fmt::print(
        "{:<3} {:<3} {:<10} {:>9} {:>9} {:>11} {:>11} {:>11} {:>11} {:>12} {:>12} {:>8} "
        "{:>7} {:>7}\n",
        "T", "P", "mode", "ms/step", "tokens/s", "params", "grads", "optimizer", "buffers",
        "activations", "sent/step", "vs ddp", "bubble", "waited");
  }
  double ddp_sent = 0;
  for (const Row& row : rows) {
    config.parallel.tensor_parallel = row.tensor_parallel;
    config.parallel.pipeline_parallel = row.pipeline_parallel;
    config.parallel.mode = row.mode;
    config.parallel.shard_group_size = row.shard_group_size;
    std::unique_ptr<Trainer> trainer = synthetic_trainer(config, world);
    Topology& topo = trainer->topology();
    std::string name = row.mode == ParallelMode::hybrid
                           ? fmt::format("hybrid/{}", row.shard_group_size)
                           : to_string(row.mode);
    const std::string label =
        fmt::format("{:<3} {:<3} {:<10}", row.tensor_parallel, row.pipeline_parallel, name);
    time_steps(*trainer, 1, label + " warm-up");  // before the counted steps
    Group* groups[] = {topo.shard.get(), topo.replicate.get(), topo.tensor.get(),
                       topo.pipeline.get()};
    for (Group* group : groups) group->reset_stats();
    double waited = 0;
    const double seconds = time_steps(*trainer, steps, label, &waited);
    CommStats comm;
    for (Group* group : groups) comm.add(group->stats());
    double sent = static_cast<double>(comm.sent_bytes) / (steps + 1);  // + the warm-up step
    if (row.mode == ParallelMode::ddp && row.tensor_parallel == 1 && row.pipeline_parallel == 1) {
      ddp_sent = sent;
    }
    StateBytes b = trainer->engine().bytes();
    if (world.rank() != 0) continue;
    const bool staged = row.pipeline_parallel > 1;
    const std::string bubble =
        staged
            ? fmt::format("{:.0f}%", 100 * pipeline_bubble_fraction(row.pipeline_parallel,
                                                                    trainer->accumulation_steps()))
            : "-";
    const std::string wait = staged ? fmt::format("{:.0f}%", 100 * waited / seconds) : "-";
    fmt::print(
        "{:<3} {:<3} {:<10} {:>9.1f} {:>9.0f} {:>11} {:>11} {:>11} {:>11} {:>12} {:>12} "
        "{:>8.2f} {:>7} {:>7}\n",
        row.tensor_parallel, row.pipeline_parallel, name, seconds * 1e3,
        config.training.batch_size * config.training.seq_len / seconds, format_bytes(b.params),
        format_bytes(b.grads), format_bytes(b.optimizer), format_bytes(b.buffers),
        format_bytes(trainer->model().activation_bytes().total), format_bytes(sent),
        ddp_sent > 0 ? sent / ddp_sent : 0.0, bubble, wait);
  }
  if (world.rank() == 0) {
    fmt::print(
        "theory (ring, per rank): ddp all-reduce = 2 x model x (n-1)/n = {} per step; "
        "zero1/zero2 1x that with one micro-batch per step; zero3 1.5x (less when gathered "
        "units stay cached); T = 2 rows add the tensor group's per-layer all-gathers and "
        "reduce-scatters of activations (cost_models/tensor_parallel_model.h) and move half "
        "the state over n / 2 data-parallel ranks\n",
        format_bytes(2 * model_bytes * (n - 1.0) / n));
    fmt::print(
        "P = 2 rows: bytes and memory are rank 0's (the first stage: the embedding and "
        "the most micro-batches in flight); sent adds the stage boundary's activations "
        "and gradients (cost_models/pipeline_model.h); bubble = (P - 1) / (M + P - 1) of a "
        "step, waited = rank 0's time blocked on the other stage's messages{}\n",
        pipelines ? ""
                  : " (no P rows: they need an even world and an untied LM head, "
                    "--model.tie_embeddings=false)");
  }
}

void benchmark_offload(Config config, Group& world, int steps) {
  const TrainingConfig& t = config.training;
  const bool leader = world.rank() == 0;
  if (leader) {
    fmt::print(
        "offload benchmark {}: {} parameters, {} rank(s), mode {}, {}, batch {} x {}; "
        "zenflow topk_ratio {}, update_interval {}, overlap_step {}\n",
        config.path, layout_build(config.model).total_numel, world.size(), config.parallel.mode,
        t.precision, t.batch_size, t.seq_len, config.zenflow.topk_ratio,
        config.zenflow.update_interval.automatic()
            ? std::string("auto")
            : std::to_string(config.zenflow.update_interval.value),
        config.zenflow.overlap_step);
    fmt::print("{:<16} {:>9} {:>9} {:>11} {:>11} {:>12} {:>7} {:>12} {:>11} {:>11}\n", "optimizer",
               "ms/step", "tokens/s", "device", "host", "to host/st", "early", "to dev/st",
               "host ms/st", "waited ms/st");
  }
  struct Variant {
    const char* name;
    OffloadTarget offload;
    bool delayed, zenflow;
  };
  for (const Variant& v : {Variant{"device", OffloadTarget::none, false, false},
                           Variant{"offload", OffloadTarget::cpu, false, false},
                           Variant{"offload+delayed", OffloadTarget::cpu, true, false},
                           Variant{"zenflow", OffloadTarget::none, false, true}}) {
    config.offload.optimizer = v.offload;
    config.offload.delayed_update = v.delayed;
    config.zenflow.enabled = v.zenflow;
    std::unique_ptr<Trainer> trainer = synthetic_trainer(config, world);
    const std::string label = fmt::format("{:<16}", v.name);
    time_steps(*trainer, 1, label + " warm-up");  // before the counted steps
    const OffloadStats before = trainer->engine().offload_stats();
    const double seconds = time_steps(*trainer, steps, label);
    const OffloadStats after = trainer->engine().offload_stats();
    const int counted = steps + 1;  // time_steps' own warm-up step, then `steps`
    const StateBytes b = trainer->engine().bytes();
    if (!leader) continue;
    const uint64_t to_host = after.to_host_bytes - before.to_host_bytes;
    const uint64_t early = after.to_host_early_bytes - before.to_host_early_bytes;
    fmt::print(
        "{:<16} {:>9.1f} {:>9.0f} {:>11} {:>11} {:>12} {:>7} {:>12} {:>11.2f} {:>11.2f}\n", v.name,
        seconds * 1e3, t.batch_size * t.seq_len / seconds, format_bytes(b.total()),
        format_bytes(b.host), format_bytes(static_cast<double>(to_host) / counted),
        to_host ? fmt::format("{:.0f}%", 100.0 * early / to_host) : "-",
        format_bytes(static_cast<double>(after.to_device_bytes - before.to_device_bytes) / counted),
        (after.host_seconds - before.host_seconds) * 1e3 / counted,
        (after.wait_seconds - before.wait_seconds) * 1e3 / counted);
  }
  if (leader) {
    fmt::print(
        "device = the device's state + buffers per rank; host = the offloaded optimizer's "
        "host memory; early = the share of the bytes to host whose copy started before the "
        "optimizer step, as each gradient became final; host ms = the worker's busy time, "
        "waited ms = the time the step blocked on it (on a GPU: device idle)\n");
  }
}

void benchmark_memory(Config config, Group& world, int steps) {
  const ModelConfig& m = config.model;
  const TrainingConfig& t = config.training;
  const bool leader = world.rank() == 0;
  if (leader) {
    fmt::print(
        "activation memory {}: dim {}, {} layers, {} heads ({} kv), ffn {}, micro-batch {} "
        "x {} tokens\n",
        config.path, m.dim, m.n_layers, m.n_heads, m.n_kv_heads, m.ffn_dim, t.micro_batch_size,
        t.seq_len);
    fmt::print("{:<6} {:<10} {:>9} {:>12} {:>14} {:>14} {:>12}\n", "dtype", "recompute", "tokens/s",
               "activations", "kept block", "ckpt block", "peak RSS");
  }
  for (Precision precision : {Precision::fp32, Precision::bf16}) {
    for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
      config.training.precision = precision;
      config.training.recompute = recompute;
      std::unique_ptr<Trainer> trainer = synthetic_trainer(config, world);
      double seconds =
          time_steps(*trainer, steps, fmt::format("{:<6} {:<10}", precision, recompute));
      const ActivationBytes& a = trainer->model().activation_bytes();
      if (!leader) continue;
      fmt::print("{:<6} {:<10} {:>9.0f} {:>12} {:>14} {:>14} {:>12}\n", precision, recompute,
                 t.batch_size * t.seq_len / seconds, format_bytes(a.total),
                 format_bytes(a.per_block_kept),
                 recompute == Recompute::none ? "-" : format_bytes(a.per_block_recomputed),
                 format_bytes(peak_resident_bytes()));
    }
  }
  if (!leader) return;
  // The planner's figures are the table's (Transformer::activation_bytes, what
  // the model allocates); beside them, the textbook layer for comparison.
  const double s = t.seq_len, b = t.micro_batch_size, h = m.dim, a = m.n_heads;
  fmt::print(
      "textbook 16-bit layer (Korthikanti et al.): s b h (34 + 5 a s / h) = {} kept, "
      "2 s b h = {} with full recomputation\n",
      format_bytes(s * b * h * (34 + 5 * a * s / h)), format_bytes(2 * s * b * h));
}

}  // namespace llm
