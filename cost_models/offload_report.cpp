// The table of `./train scale --offload` (see offload_report.h).
#include "cost_models/offload_report.h"

#include <fmt/format.h>

#include <string>

#include "model/layout.h"
#include "parallel/topology.h"
#include "cost_models/offload_model.h"
#include "cost_models/step_trace.h"

namespace llm {
namespace {

// DeepSpeed's ZenFlow blog (blogs/deepspeed-zenflow/README.md), Llama-2-7B on
// 4 x A100: quoted next to the model, never used by it.
constexpr const char* kPublished[] = {
    "~0.5 s/step without offload, >7 s with ZeRO-Offload (a 14x slowdown)",
    "ZeRO-Offload: >60% of each step GPU idle; the CPU path >4 s against a ~2 s backward",
    "ZenFlow: up to 5x faster than ZeRO-Offload, >85% less GPU stall, ~2x less PCIe traffic "
    "(1.13 vs 2 model sizes per step)",
};

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

std::string count_text(double n) {
  return n >= 1e9 ? fmt::format("{:.2f}B", n / 1e9) : fmt::format("{:.2f}M", n / 1e6);
}

}  // namespace

void offload_print_table(const Config& config, int world, const HardwareProfile& hw) {
  const OffloadPrediction p = offload_predict(config, world, hw);
  const ShardingPlan plan = sharding_plan(config.parallel, world);
  const ParameterLayout layout = layout_build(config.model);
  double owned = 0;
  for (const UnitSpec& unit : layout.units) {
    owned += static_cast<double>(unit_shard_elements(unit.numel, plan.shard_group_size));
  }
  const int ranks_per_node = std::min(world, hw.node.devices_per_node);
  const ZenFlowConfig& z = config.zenflow;
  fmt::print(
      "{}: {} parameters, {} on {} ranks ({} owned per rank), micro-batch {} x {}, "
      "{} micro-batches per step, {}\n",
      config.path, count_text(static_cast<double>(layout.total_numel)), config.parallel.mode, world,
      count_text(owned), config.training.micro_batch_size, config.training.seq_len,
      p.device.micro_batches, config.precision());
  fmt::print("{} ({})\n", hw.path, hw.name);
  fmt::print(
      "per rank: host AdamW {:.3g} elements/s, accumulate {:.3g}/s, PCIe {:.1f} GB/s each way\n",
      hw.rank_host_adamw_rate(ranks_per_node), hw.rank_host_accumulate_rate(ranks_per_node),
      hw.rank_pcie_bandwidth(ranks_per_node) / 1e9);
  fmt::print(
      "forward + backward + exposed communication F = {:.3f} s (compute {:.3f} s), device "
      "optimizer O = {:.3f} s; ZenFlow topk_ratio {}, update_interval {}{}, overlap_step {}\n\n",
      p.forward_backward_seconds, p.device.compute_seconds, p.device.optimizer_seconds,
      z.topk_ratio, p.update_interval, z.update_interval.automatic() ? " (auto)" : "",
      z.overlap_step);

  fmt::print(
      "| mode | step s | device optimizer s | host AdamW s | host accumulate s | PCIe down s | "
      "PCIe up s | exposed host s | host stall s | GPU idle s | PCIe GB |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (OffloadMode mode : kOffloadModes) {
    const OffloadModePrediction& m = p[mode];
    fmt::print(
        "| {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | "
        "{:.2f} |\n",
        offload_mode_name(mode), m.step_seconds, m.device_optimizer_seconds, m.host_adamw_seconds,
        m.host_accumulate_seconds, m.to_host_seconds, m.to_device_seconds, m.exposed_host_seconds,
        m.host_stall_seconds, m.gpu_idle_seconds, m.pcie_bytes / 1e9);
  }
  const OffloadModePrediction& none = p[OffloadMode::none];
  const OffloadModePrediction& offload = p[OffloadMode::offload];
  const OffloadModePrediction& zenflow = p[OffloadMode::zenflow];
  fmt::print(
      "\nmodel: offload / none {:.2f}x; offload / zenflow {:.2f}x; offload+delayed / none "
      "{:.2f}x\n",
      ratio(offload.step_seconds, none.step_seconds),
      ratio(offload.step_seconds, zenflow.step_seconds),
      ratio(p[OffloadMode::offload_delayed].step_seconds, none.step_seconds));
  fmt::print(
      "model: GPU idle {:.0f}% of the offload step; zenflow {:.0f}% less GPU idle and {:.0f}% less "
      "host stall than offload; offload / zenflow PCIe bytes {:.2f}x\n",
      100 * ratio(offload.gpu_idle_seconds, offload.step_seconds),
      100 * (1 - ratio(zenflow.gpu_idle_seconds, offload.gpu_idle_seconds)),
      100 * (1 - ratio(zenflow.host_stall_seconds, offload.host_stall_seconds)),
      ratio(offload.pcie_bytes, zenflow.pcie_bytes));
  fmt::print("DeepSpeed (ZenFlow blog, Llama-2-7B on 4 x A100):\n");
  for (const char* line : kPublished) fmt::print("  {}\n", line);
}

}  // namespace llm
