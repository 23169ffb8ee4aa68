// Memory planner behind `./train plan`: rows of (P, T, mode, recomputation,
// precision, offload) with the trainer's memory_plan of each.
// Invariant: a row "fits" when its bytes are at most the usable memory (the
// device's less what the CUDA context, NCCL and the allocator keep); the
// recommendation also leaves kRecommendedHeadroom of that to spare.
#include "planning/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "runtime/error.h"
#include "runtime/system.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/topology.h"

namespace llm {

namespace {

// The tensor-parallel degrees worth listing: 1, then powers of two up to a
// node that divide the world and split the model evenly.
std::vector<int> tensor_parallel_degrees(const Config& config, int world, int devices_per_node) {
  std::vector<int> degrees = {1};
  for (int t = 2; t <= std::min(world, devices_per_node); t *= 2) {
    if (world % t == 0 && !tensor_parallel_uneven_split(config, t).key) degrees.push_back(t);
  }
  return degrees;
}

// The pipeline degrees worth listing: 1, then powers of two up to
// kMaxPipelineStages that divide the world and leave every stage a block;
// none with tied embeddings (the embedding and the head are on different
// stages, which parallel.pipeline_parallel refuses).
constexpr int kMaxPipelineStages = 8;
std::vector<int> pipeline_parallel_degrees(const Config& config, int world) {
  std::vector<int> degrees = {1};
  if (config.model.tie_embeddings) return degrees;
  for (int p = 2; p <= std::min(kMaxPipelineStages, config.model.n_layers); p *= 2) {
    if (world % p == 0) degrees.push_back(p);
  }
  return degrees;
}

// Every row of one mesh: T x P x D ranks.
void add_mesh_rows(std::vector<PlanRow>& rows, const Config& config, int tp, int pp, int dp,
                   int hybrid_group, size_t device_bytes) {
  const bool model_parallel = tp > 1 || pp > 1;
  std::vector<std::pair<ParallelMode, int>> modes = {
      {ParallelMode::ddp, 0}, {ParallelMode::zero1, 0}, {ParallelMode::zero2, 0}};
  if (hybrid_group > 1 && hybrid_group < dp && dp % hybrid_group == 0) {
    modes.push_back({ParallelMode::hybrid, hybrid_group});
  }
  modes.push_back({ParallelMode::zero3, 0});
  for (OffloadTarget offload : {OffloadTarget::none, OffloadTarget::cpu}) {
    if (model_parallel && offload == OffloadTarget::cpu) continue;
    for (const auto& [mode, shard_group_size] : modes) {
      for (Recompute checkpointing : {Recompute::none, Recompute::selective, Recompute::full}) {
        for (Precision precision : {Precision::bf16, Precision::fp32}) {
          if ((offload == OffloadTarget::cpu || model_parallel) && precision == Precision::fp32)
            continue;
          Config c = config;
          c.parallel.tensor_parallel = tp;
          c.parallel.pipeline_parallel = pp;
          c.parallel.mode = mode;
          c.parallel.shard_group_size = shard_group_size;
          c.parallel.reduce_dtype = precision;
          c.training.activation_checkpointing = checkpointing;
          c.training.precision = precision;
          c.offload.optimizer = offload;
          c.zenflow.enabled = false;
          PlanRow row;
          row.tensor_parallel = tp;
          row.pipeline_parallel = pp;
          row.data_parallel = dp;
          row.mode = mode == ParallelMode::hybrid ? fmt::format("hybrid/{}", hybrid_group)
                                                  : to_string(mode);
          row.checkpointing = checkpointing;
          row.precision = precision;
          row.offload = offload;
          row.memory = memory_plan(c, sharding_plan(c.parallel, dp));
          row.bubble = pipeline_bubble_fraction(pp, row.memory.micro_batches);
          row.fits = row.memory.total() <= device_bytes;
          rows.push_back(row);
        }
      }
    }
  }
}

}  // namespace

std::vector<PlanRow> plan_memory(const Config& config, int world, int hybrid_group,
                                 size_t device_bytes, int devices_per_node) {
  std::vector<PlanRow> rows;
  for (int pp : pipeline_parallel_degrees(config, world)) {
    for (int tp : tensor_parallel_degrees(config, world, devices_per_node)) {
      if (world % (tp * pp) == 0) {
        add_mesh_rows(rows, config, tp, pp, world / (tp * pp), hybrid_group, device_bytes);
      }
    }
  }
  return rows;
}

const PlanRow* plan_recommend(const std::vector<PlanRow>& rows, size_t usable_bytes) {
  const double limit = (1.0 - kRecommendedHeadroom) * static_cast<double>(usable_bytes);
  for (const PlanRow& row : rows) {
    if (static_cast<double>(row.memory.total()) <= limit) return &row;
  }
  return nullptr;
}

std::string plan_row_flags(const PlanRow& row, int hybrid_group) {
  std::string flags = fmt::format("--parallel.mode={}", row.mode.substr(0, row.mode.find('/')));
  if (row.tensor_parallel > 1)
    flags += fmt::format(" --parallel.tensor_parallel={}", row.tensor_parallel);
  if (row.pipeline_parallel > 1) {
    flags += fmt::format(" --parallel.pipeline_parallel={}", row.pipeline_parallel);
  }
  if (row.mode.starts_with("hybrid"))
    flags += fmt::format(" --parallel.shard_group_size={}", hybrid_group);
  flags += fmt::format(" --training.activation_checkpointing={} --training.precision={}",
                       row.checkpointing, row.precision);
  if (row.precision == Precision::bf16) flags += " --parallel.reduce_dtype=bf16";
  if (row.offload == OffloadTarget::cpu) flags += " --offload.optimizer=cpu";
  return flags;
}

size_t parse_bytes(const std::string& text, const std::string& what) {
  size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  double scale = 0;
  LLM_CHECK(end == 0 || !unit.empty(),
            "{}: '{}' has no unit; write it with one, e.g. {}GiB, {}GB or {}B", what, text, text,
            text, text);
  for (auto [name, factor] :
       {std::pair{"B", 1.0}, std::pair{"KiB", 1024.0}, std::pair{"MiB", 1048576.0},
        std::pair{"GiB", 1073741824.0}, std::pair{"TiB", 1099511627776.0}, std::pair{"KB", 1e3},
        std::pair{"MB", 1e6}, std::pair{"GB", 1e9}, std::pair{"TB", 1e12}}) {
    if (unit == name) scale = factor;
  }
  LLM_CHECK(end > 0 && scale > 0 && value > 0, "{}: expected a size like 80GiB or 40GB, got '{}'",
            what, text);
  // Converting a double beyond size_t's range is undefined (found by
  // fuzz_hardware_toml): sizes stop at an exbibyte, far above any machine.
  LLM_CHECK(value * scale <= 0x1p60, "{}: '{}' is larger than 1 EiB", what, text);
  return static_cast<size_t>(value * scale);
}

void plan_print(const Config& config, int world, int hybrid_group, const MemoryBudget& budget) {
  const ParameterLayout layout = layout_build(config.model);
  const TrainingConfig& t = config.training;
  const size_t usable = budget.usable();
  fmt::print(
      "plan for {}: {} parameters, {} ranks, micro-batch {} x {} tokens, device memory {} "
      "less {} reserved = {} usable\n",
      config.path, layout.total_numel, world, t.micro_batch_size, t.seq_len,
      format_bytes(static_cast<double>(budget.device)),
      format_bytes(static_cast<double>(budget.reserved)),
      format_bytes(static_cast<double>(usable)));
  fmt::print(
      "per rank; bf16 rows keep fp32 master weights and moments (sharded with the optimizer "
      "state) plus a bf16 compute copy, and reduce gradients in bf16\n");
  fmt::print(
      "offload rows: fp32 masters and AdamW moments in host memory (the host column, per "
      "rank), the device keeping the bf16 compute copy\n");
  fmt::print(
      "tensor-parallel rows (T > 1): each rank holds 1/T of every layer and of the "
      "vocabulary, and 1/T of the residual stream's rows (sequence parallelism)\n");
  fmt::print(
      "pipeline rows (P > 1): each rank holds one stage's blocks (the largest stage is shown, "
      "with the micro-batches in flight under the {} schedule); bubble: the share of a step "
      "every stage idles, (P - 1) / (M + P - 1) with M = {} / ({} x D) micro-batches\n",
      config.parallel.pipeline_schedule, t.batch_size, t.micro_batch_size);
  fmt::print(
      "{:<3} {:<3} {:<3} {:>6} {:<10} {:<10} {:<5} {:<7} {:>11} {:>11} {:>11} {:>11} {:>12} "
      "{:>11} {:>11}  {}\n",
      "T", "P", "D", "bubble", "mode", "recompute", "dtype", "offload", "params", "grads",
      "optimizer", "buffers", "activations", "device", "host", "fits");
  std::vector<PlanRow> rows = plan_memory(config, world, hybrid_group, usable);
  for (const PlanRow& r : rows) {
    const MemoryPlan& m = r.memory;
    fmt::print(
        "{:<3} {:<3} {:<3} {:>5.1f}% {:<10} {:<10} {:<5} {:<7} {:>11} {:>11} {:>11} {:>11} "
        "{:>12} {:>11} {:>11}  {}\n",
        r.tensor_parallel, r.pipeline_parallel, r.data_parallel, 100 * r.bubble, r.mode,
        r.checkpointing, r.precision, r.offload, format_bytes(m.state.params),
        format_bytes(m.state.grads), format_bytes(m.state.optimizer), format_bytes(m.state.buffers),
        format_bytes(m.activations), format_bytes(m.total()),
        r.offload == OffloadTarget::none ? "-" : format_bytes(m.state.host), r.fits ? "yes" : "no");
  }
  const PlanRow* best = plan_recommend(rows, usable);
  if (best) {
    const std::string flags = plan_row_flags(*best, hybrid_group);
    fmt::print(
        "recommended (least communication, then least recomputation, that fits with {:.0f}% "
        "of the usable memory to spare): {} ({} of {} per rank)\n",
        kRecommendedHeadroom * 100, flags, format_bytes(static_cast<double>(best->memory.total())),
        format_bytes(static_cast<double>(usable)));
  } else {
    fmt::print(
        "nothing fits in {} per rank with {:.0f}% to spare: use more ranks, a smaller "
        "micro-batch or sequence\n",
        format_bytes(static_cast<double>(usable)), kRecommendedHeadroom * 100);
  }
}

}  // namespace llm
