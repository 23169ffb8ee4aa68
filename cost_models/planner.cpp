// Memory planner behind `./train plan`: rows of (P, T, mode, recomputation,
// precision, offload) with the trainer's memory_plan of each.
// Invariant: a row's config is the base config with exactly the overrides
// its command line prints; it "fits" when its bytes are at most the usable
// memory (the device's less what the CUDA context, NCCL and the allocator
// keep).
#include "cost_models/planner.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/topology.h"
#include "schema/config_validate.h"

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

// The overrides that give `base` a row's settings: each one the row decides,
// where it differs from the base.
std::vector<std::string> row_overrides(const Config& base, const PlanRow& row, ParallelMode mode,
                                       int shard_group_size) {
  std::vector<std::string> overrides;
  auto decide = [&](const char* key, const auto& value, const auto& base_value) {
    if (value != base_value) overrides.push_back(fmt::format("{}={}", key, value));
  };
  const ParallelConfig& p = base.parallel;
  decide("parallel.mode", mode, p.mode);
  decide("parallel.tensor_parallel", row.tensor_parallel, p.tensor_parallel);
  decide("parallel.pipeline_parallel", row.pipeline_parallel, p.pipeline_parallel);
  decide("parallel.shard_group_size", shard_group_size, p.shard_group_size);
  decide("training.recompute", row.recompute, base.training.recompute);
  decide("training.precision", row.precision, base.training.precision);
  decide("parallel.reduce_dtype", stores_bf16(row.precision) ? Precision::bf16 : Precision::fp32,
         p.reduce_dtype);
  decide("offload.optimizer", row.offload, base.offload.optimizer);
  decide("zenflow.enabled", false, base.zenflow.enabled);
  return overrides;
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
  // The 16-bit rows are fp8's when the config asks for fp8 (its FP8 copies
  // counted), bf16's otherwise.
  const Precision low =
      config.training.precision == Precision::fp8 ? Precision::fp8 : Precision::bf16;
  for (OffloadTarget offload : {OffloadTarget::none, OffloadTarget::cpu}) {
    if (model_parallel && offload == OffloadTarget::cpu) continue;
    for (const auto& [mode, shard_group_size] : modes) {
      for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
        for (Precision precision : {low, Precision::fp32}) {
          if ((offload == OffloadTarget::cpu || model_parallel) && precision == Precision::fp32)
            continue;
          PlanRow row;
          row.tensor_parallel = tp;
          row.pipeline_parallel = pp;
          row.data_parallel = dp;
          row.mode = mode == ParallelMode::hybrid ? fmt::format("hybrid/{}", hybrid_group)
                                                  : to_string(mode);
          row.recompute = recompute;
          row.precision = precision;
          row.offload = offload;
          row.config = config;
          config_apply_overrides(row.config, row_overrides(config, row, mode, shard_group_size));
          row.memory = memory_plan(row.config, sharding_plan(row.config.parallel, dp));
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

}  // namespace llm
