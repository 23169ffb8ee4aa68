// The offload model (see offload_model.h): the device-only prediction, then
// the host path of each offload mode over the rank's units.
#include "cost_models/offload_model.h"

#include <algorithm>
#include <numeric>

#include "model/layout.h"
#include "parallel/topology.h"
#include "parallel/zenflow.h"
#include "cost_models/step_trace.h"
#include "base/error.h"

namespace llm {
namespace {

// Device bytes per owned element of ZenFlow's column work: the column norms
// read the gradient (4); per selected element, the gradient gathered (read 4,
// write 4) and the compute copy scattered (read 4, write 2).
constexpr double kColumnNormBytes = 4, kSelectedColumnBytes = 14;

double sum(const std::vector<double>& x) { return std::accumulate(x.begin(), x.end(), 0.0); }

// One copy of `bytes`; none when there is nothing to copy.
double copy_seconds(double bytes, double bandwidth, double latency) {
  return bytes > 0 ? latency + bytes / bandwidth : 0.0;
}

// The rank's units in landing order (the replay's announcements, then any
// unit never announced, final at the optimizer phase F) with their copies
// and the host work `work` picks for each.
template <class Work>
std::vector<HostPathUnit> host_path_units(const StepPrediction& offloaded, double F,
                                          const std::vector<double>& down,
                                          const std::vector<double>& up, Work&& work) {
  std::vector<HostPathUnit> units;
  std::vector<bool> announced(down.size(), false);
  auto add = [&](int u, double ready) {
    units.push_back({ready, down[u], work(u), up[u]});
    announced[u] = true;
  };
  for (const GradientFinal& g : offloaded.gradient_final) {
    if (!announced[g.unit]) add(g.unit, g.seconds);
  }
  for (size_t u = 0; u < down.size(); ++u) {
    if (!announced[u]) add(static_cast<int>(u), F);
  }
  return units;
}

std::vector<HostPathUnit> without_uploads(std::vector<HostPathUnit> units) {
  for (HostPathUnit& unit : units) unit.up = 0;
  return units;
}

// A step's end and the host work it waits for after the last gradient landed.
struct HostPhase {
  double step = 0, exposed = 0;
};
// The step waits for its own host work and uploads (plain offload, ZenFlow's
// update step without overlap_step), and for the device until `device_end`.
HostPhase waited_step(const HostTimeline& t, double F, double device_end) {
  return {std::max(device_end, t.uploads_end),
          std::max(0.0, t.work_end - std::max(F, t.downs_end))};
}
// A step whose host work is waited for one step later (delayed_update,
// ZenFlow's accumulation, overlap_step): the phase ends once every gradient
// has landed and `device_end`, plus what of the host work the next F did
// not hide, plus `uploads`.
HostPhase deferred_step(const HostTimeline& t, double F, double device_end, double uploads) {
  const double exposed = std::max(0.0, t.work_end - std::max(F, t.downs_end) - F);
  return {std::max(device_end, t.downs_end) + exposed + uploads, exposed};
}

}  // namespace

const char* offload_mode_name(OffloadMode mode) {
  switch (mode) {
    case OffloadMode::none:
      return "none";
    case OffloadMode::offload:
      return "offload";
    case OffloadMode::offload_delayed:
      return "offload+delayed";
    case OffloadMode::zenflow:
      return "zenflow";
  }
  return "?";
}

OffloadMode offload_mode_of(const Config& config) {
  if (config.zenflow.enabled) return OffloadMode::zenflow;
  if (config.offload.optimizer == OffloadTarget::none) return OffloadMode::none;
  return config.offload.delayed_update ? OffloadMode::offload_delayed : OffloadMode::offload;
}

HostTimeline offload_host_timeline(const std::vector<HostPathUnit>& units, double phase,
                                   double uploads_after) {
  HostTimeline t;
  t.work_end = phase;
  for (const HostPathUnit& u : units) t.downs_end = std::max(u.ready, t.downs_end) + u.down;
  t.uploads_end = std::max(t.downs_end, uploads_after);
  double landed = 0;
  for (const HostPathUnit& u : units) {
    landed = std::max(u.ready, landed) + u.down;
    t.work_end = std::max(landed, t.work_end) + u.work;
    t.uploads_end = std::max(t.work_end, t.uploads_end) + u.up;
  }
  return t;
}

OffloadPrediction offload_predict(const Config& config, int world, const HardwareProfile& hw) {
  Config device_only = config;
  device_only.offload = OffloadConfig{};
  device_only.zenflow.enabled = false;
  Config host_masters = device_only;
  host_masters.offload.optimizer = OffloadTarget::cpu;
  OffloadPrediction p;
  p.device = throughput_predict(device_only, world, hw);
  p.offloaded = throughput_predict(host_masters, world, hw);
  const double O = p.device.optimizer_seconds;
  const double F = p.offloaded.step_seconds - p.offloaded.optimizer_seconds;
  p.forward_backward_seconds = F;

  const ShardingPlan plan = sharding_plan(config.parallel, world);
  const ParameterLayout layout = layout_build(config.model);
  const int ranks_per_node = std::min(world, hw.node.devices_per_node);
  const double pcie = hw.rank_pcie_bandwidth(ranks_per_node), latency = 1e-6 * hw.pcie.latency_us;
  const double adamw_rate = hw.rank_host_adamw_rate(ranks_per_node);
  const double accumulate_rate = hw.rank_host_accumulate_rate(ranks_per_node);
  const double copy_bytes = stores_bf16(config.precision()) ? 2.0 : 4.0;
  const double k = config.zenflow.topk_ratio;
  const ZenFlowConfig& zen = config.zenflow;
  const int U =
      zen.update_interval.automatic() ? kZenFlowAutoUpdateIntervalStart : zen.update_interval.value;
  const int select_every = zen.select_interval.automatic() ? U : zen.select_interval.value;
  p.update_interval = U;

  // Per unit: gradient down, compute copy up, host work.
  const size_t units = layout.units.size();
  std::vector<double> down(units), up(units), adamw(units), accumulate(units), zen_update(units);
  double owned = 0;
  for (size_t u = 0; u < units; ++u) {
    const double s =
        static_cast<double>(unit_shard_elements(layout.units[u].numel, plan.shard_group_size));
    owned += s;
    down[u] = copy_seconds(4 * s, pcie, latency);
    up[u] = copy_seconds(copy_bytes * s, pcie, latency);
    adamw[u] = s / adamw_rate;
    accumulate[u] = s / accumulate_rate;
    zen_update[u] = accumulate[u] + adamw[u];
  }
  // One all-reduce of every matrix column's norm per choice (none alone).
  size_t columns = 0;
  ZenFlow::column_norm_offsets(layout, columns);
  const GroupSpan shard_span =
      group_span(GroupRole::shard, world, plan.shard_group_size, hw.node.devices_per_node);
  const double norm_all_reduce =
      plan.shard_group_size > 1
          ? collective_seconds(CollectiveOp::all_reduce, shard_span, 4.0 * columns, hw) /
                select_every
          : 0.0;
  const double compute = p.device.compute_seconds;

  OffloadModePrediction& none = p.modes[static_cast<int>(OffloadMode::none)];
  none.step_seconds = p.device.step_seconds;
  none.device_optimizer_seconds = O;
  none.gpu_idle_seconds = none.step_seconds - compute - O;

  auto units_with = [&](auto work) { return host_path_units(p.offloaded, F, down, up, work); };
  const std::vector<HostPathUnit> adamw_units = units_with([&](int u) { return adamw[u]; });
  for (OffloadMode mode : {OffloadMode::offload, OffloadMode::offload_delayed}) {
    OffloadModePrediction& m = p.modes[static_cast<int>(mode)];
    const HostPhase phase =
        mode == OffloadMode::offload
            ? waited_step(offload_host_timeline(adamw_units, F, F), F, F)
            : deferred_step(offload_host_timeline(without_uploads(adamw_units), F, F), F, F,
                            sum(up));
    m.step_seconds = phase.step;
    m.exposed_host_seconds = phase.exposed;
    m.host_adamw_seconds = sum(adamw);
    m.to_host_seconds = sum(down);
    m.to_device_seconds = sum(up);
    m.host_stall_seconds = m.step_seconds - F;
    m.gpu_idle_seconds = m.step_seconds - compute;
    m.pcie_bytes = (4 + copy_bytes) * owned;
  }

  const double D = k * O +
                   (kColumnNormBytes + kSelectedColumnBytes * k) * owned /
                       hw.rank_memory_bandwidth(ranks_per_node) +
                   norm_all_reduce;
  const double device_end = F + D;
  const HostTimeline accumulated = offload_host_timeline(
      without_uploads(units_with([&](int u) { return accumulate[u]; })), F, F);
  const HostPhase ordinary = deferred_step(accumulated, F, device_end, 0);
  const std::vector<HostPathUnit> update_units = units_with([&](int u) { return zen_update[u]; });
  const HostPhase update =
      config.zenflow.overlap_step
          ? deferred_step(offload_host_timeline(without_uploads(update_units), F, F), F, device_end,
                          sum(up))
          : waited_step(offload_host_timeline(update_units, F, device_end), F, device_end);
  auto average = [&](double ordinary_value, double update_value) {
    return ((U - 1) * ordinary_value + update_value) / U;
  };
  OffloadModePrediction& z = p.modes[static_cast<int>(OffloadMode::zenflow)];
  z.step_seconds = average(ordinary.step, update.step);
  z.device_optimizer_seconds = D;
  z.host_adamw_seconds = sum(adamw) / U;
  z.host_accumulate_seconds = sum(accumulate);
  z.to_host_seconds = sum(down);
  z.to_device_seconds = sum(up) / U;
  z.exposed_host_seconds = average(ordinary.exposed, update.exposed);
  z.host_stall_seconds = z.step_seconds - F - D;
  z.gpu_idle_seconds = z.step_seconds - compute - D;
  z.pcie_bytes = 4 * owned + copy_bytes * owned / U;
  return p;
}

}  // namespace llm
