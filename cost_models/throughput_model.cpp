// The throughput model (see throughput_model.h): the recorded step schedule,
// re-sized for the real config, costed and replayed.
#include "cost_models/throughput_model.h"

#include <algorithm>
#include <vector>

#include "model/flops.h"
#include "base/error.h"
#include "model/layout.h"
#include "parallel/pipeline_schedule.h"
#include "model/transformer.h"
#include "parallel/topology.h"
#include "cost_models/contention.h"
#include "cost_models/slowest_rank.h"
#include "cost_models/tensor_parallel_model.h"

namespace llm {
namespace {

constexpr size_t kScalarBytes = sizeof(double);

// One collective of the real config, per rank.
struct SizedCollective {
  CollectiveOp op;
  GroupRole group;
  bool scalar;
  size_t count;  // elements
  size_t element_bytes;
  CollectiveCost cost;
};

// Payload and ring bytes sent, with the comm layer's own formulas (comm.h).
Traffic traffic_of(CollectiveOp op, size_t count, size_t element_bytes, int n) {
  const uint64_t bytes = static_cast<uint64_t>(count) * element_bytes;
  return op == CollectiveOp::all_reduce ? all_reduce_traffic(bytes, n) : chunked_traffic(bytes, n);
}

void add_traffic(OpTraffic& t, CollectiveOp op, size_t count, size_t element_bytes, int n) {
  const Traffic traffic = traffic_of(op, count, element_bytes, n);
  t.calls += 1;
  t.payload_bytes += traffic.payload;
  t.sent_bytes += traffic.sent;
}

// Bytes the optimizer step touches on rank 0: AdamW reads parameter,
// gradient and both moments and writes three of them (28 bytes per owned
// element), the gradient norm reads the gradient (4), the bf16 compute copy
// is refreshed (read 4, write 2 per copied element), and zero_grads clears
// the gradient buffers (4 per element).
double optimizer_bytes(const ParameterLayout& layout, const ShardingPlan& plan,
                       Precision precision) {
  double bytes = 0;
  for (const UnitSpec& unit : layout.units) {
    const double s = static_cast<double>(unit_shard_elements(unit.numel, plan.shard_group_size));
    const double padded = s * plan.shard_group_size;
    bytes += 32 * s;
    if (stores_bf16(precision)) bytes += 6 * (plan.shard_params ? s : padded);
    if (!plan.shard_grads) bytes += 4 * padded;
    if (plan.shard_optimizer) bytes += 4 * s;
  }
  return bytes;
}

// Merges ddp's per-unit gradient all-reduces into buckets of at least
// `bucket_bytes` (in issue order, each bucket issued when its last member
// is); waits on a member wait on its bucket.
void bucket_gradients(std::vector<SizedCollective>& collectives, std::vector<StepEvent>& events,
                      size_t bucket_bytes) {
  auto bucketable = [&](int c) {
    const SizedCollective& x = collectives[c];
    return !x.scalar && x.op == CollectiveOp::all_reduce && x.group == GroupRole::replicate;
  };
  int last = -1;
  for (const StepEvent& e : events) {
    if (e.type == StepEvent::Type::issue && bucketable(e.collective)) last = e.collective;
  }
  std::vector<int> bucket_of(collectives.size(), -1);
  std::vector<int> open;
  size_t open_bytes = 0;
  std::vector<StepEvent> merged;
  for (StepEvent e : events) {
    if (e.type == StepEvent::Type::issue && bucketable(e.collective)) {
      open.push_back(e.collective);
      open_bytes += collectives[e.collective].count * collectives[e.collective].element_bytes;
      if (open_bytes < bucket_bytes && e.collective != last) continue;
      SizedCollective bucket = collectives[open.front()];
      bucket.count = open_bytes / bucket.element_bytes;
      collectives.push_back(bucket);
      const int id = static_cast<int>(collectives.size()) - 1;
      for (int member : open) bucket_of[member] = id;
      open.clear();
      open_bytes = 0;
      e.collective = id;
    } else if (e.type == StepEvent::Type::wait &&
               e.collective < static_cast<int>(bucket_of.size()) && bucket_of[e.collective] >= 0) {
      e.collective = bucket_of[e.collective];
    }
    merged.push_back(e);
  }
  events = std::move(merged);
}

}  // namespace

int pipeline_compute_stage(const Config& config) {
  const int stages = config.parallel.pipeline_parallel;
  int slowest = 0;
  double most = -1;
  for (int stage = 0; stage < stages; ++stage) {
    const ParameterLayout layout = layout_build(config.model, {0, 1, stage, stages});
    double flops = 0;
    for (int u = 0; u < static_cast<int>(layout.units.size()); ++u) {
      if (layout.units[u].numel == 0) continue;  // another stage's
      flops += unit_pass_flops(config, u, Pass::forward).total() +
               unit_pass_flops(config, u, Pass::backward).total();
    }
    if (flops > most) {
      most = flops;
      slowest = stage;
    }
  }
  return slowest;
}

StepPrediction throughput_predict(const Config& config, int world, const HardwareProfile& hw,
                                  const ThroughputOptions& options) {
  // Tensor parallelism: the data-parallel engine's trace over D = world /
  // (T P) ranks moves this rank's slice of every unit of its stage (the stage
  // with the most compute); a node holds devices_per_node / T positions of
  // the data dimension.
  const std::string missing = hw.missing_figure(config);
  LLM_CHECK(missing.empty(), "throughput model: {}", missing);
  const int T = config.parallel.tensor_parallel, P = config.parallel.pipeline_parallel;
  const int D = data_parallel_size(config.parallel, world);
  const int stage = pipeline_compute_stage(config);
  Config data_parallel = config;
  data_parallel.parallel.tensor_parallel = 1;
  const ShardingPlan plan = sharding_plan(config.parallel, D);
  const int S = plan.shard_group_size;
  const ParameterLayout layout = layout_build(config.model, {0, T, stage, P});
  const int num_units = static_cast<int>(layout.units.size());
  const StepTrace trace = step_trace_record(data_parallel, D, stage);
  const int ranks_per_node = std::min(world, hw.node.devices_per_node);
  const int data_positions_per_node = std::max(1, hw.node.devices_per_node / T);
  const GroupSpan tensor_span{T, (T + hw.node.devices_per_node - 1) / hw.node.devices_per_node,
                              std::min(T, hw.node.devices_per_node)};

  // Re-size every recorded collective for the real config.
  auto numel_of = [&](UnitKind kind) {
    switch (kind) {
      case UnitKind::embed:
        return layout.units[0].numel;
      case UnitKind::block:
        return layout.units[layout.block_unit(layout.layers.begin)].numel;
      case UnitKind::head:
        return layout.units.back().numel;
      case UnitKind::scalar:
        break;
    }
    return size_t{1};
  };
  std::vector<SizedCollective> collectives;
  for (const TracedCollective& c : trace.collectives) {
    SizedCollective x{c.op, c.group, c.kind == UnitKind::scalar, 0, 0, {}};
    x.count = x.scalar ? 1 : unit_shard_elements(numel_of(c.kind), S);
    x.element_bytes = x.scalar ? kScalarBytes : wire_bytes(c.type);
    collectives.push_back(x);
  }
  std::vector<StepEvent> events = trace.events;
  if (options.ddp_bucket_bytes > 0 && plan.mode == ParallelMode::ddp) {
    bucket_gradients(collectives, events, options.ddp_bucket_bytes);
  }

  StepPrediction p;
  p.micro_batches = trace.micro_batches;
  p.pipeline_stage = stage;
  GroupSpan spans[3];
  for (GroupRole role : {GroupRole::world, GroupRole::shard, GroupRole::replicate}) {
    spans[static_cast<int>(role)] = group_span(role, D, S, data_positions_per_node);
  }
  for (SizedCollective& c : collectives) {
    const GroupSpan& span = spans[static_cast<int>(c.group)];
    const double payload =
        static_cast<double>(traffic_of(c.op, c.count, c.element_bytes, span.size).payload);
    c.cost = collective_cost(c.op, span, payload, hw);
  }

  // Replay: one compute timeline, one channel per group. The timeline is the
  // slowest rank's: with rates that persist (a device's own, as measured),
  // the slowest of the world arrives last at every collective, so every
  // synchronizing collective waits for its expected maximum (slowest_rank.h).
  const double flops_rate = hw.rank_flops(config.precision(), ranks_per_node);
  const double slowest = slowest_rank_factor(hw.device.rate_dispersion, world);
  // Per unit pass: this rank's 1/T of the FLOPs (and of those a pass
  // recomputes: what it runs beyond the same pass without recomputation),
  // and the tensor group's collectives, which the model waits for in line
  // (exposed).
  std::vector<double> flops_by_unit_pass(2 * num_units), recompute_flops(2 * num_units);
  std::vector<double> tensor_seconds(2 * num_units, 0.0);
  const std::vector<std::vector<TensorCollective>> tensor = tensor_parallel_collectives(config);
  Config without_recompute = config;
  without_recompute.training.recompute = Recompute::none;
  for (int u = 0; u < num_units; ++u) {
    for (Pass pass : {Pass::forward, Pass::backward}) {
      const int i = 2 * u + (pass == Pass::backward);
      flops_by_unit_pass[i] = unit_pass_flops(config, u, pass).total() / T;
      recompute_flops[i] =
          flops_by_unit_pass[i] - unit_pass_flops(without_recompute, u, pass).total() / T;
      for (const TensorCollective& c : tensor[i]) {
        const double payload =
            static_cast<double>(traffic_of(c.op, c.count, c.element_bytes, T).payload);
        tensor_seconds[i] += collective_seconds(c.op, tensor_span, payload, hw);
      }
    }
  }
  std::vector<double> ends(collectives.size(), -1.0);
  std::vector<bool> issued(collectives.size(), false);
  double channel_free[3] = {0, 0, 0};
  double t = 0;
  ComputeTimeline timeline(hw.device.compute_units);
  auto run = [&](int id, double from) {
    SizedCollective& c = collectives[id];
    double& channel = channel_free[static_cast<int>(c.group)];
    double start = std::max(from, channel);
    ends[id] = start + c.cost.seconds;
    channel = ends[id];
    timeline.hold(start, ends[id], c.cost.blocks);
  };
  for (const StepEvent& e : events) {
    switch (e.type) {
      case StepEvent::Type::compute: {
        const int i = 2 * e.unit + (e.pass == Pass::backward);
        const double mean_seconds = flops_by_unit_pass[i] / flops_rate;
        const double seconds = mean_seconds * slowest;
        t = timeline.run(t, seconds) + tensor_seconds[i];
        p.compute_seconds += seconds;
        p.straggler_seconds += seconds - mean_seconds;
        p.recompute_seconds += recompute_flops[i] / flops_rate * slowest;
        p.tensor_comm_seconds += tensor_seconds[i];
        p.comm_seconds += tensor_seconds[i];
        break;
      }
      case StepEvent::Type::optimizer: {
        double seconds = optimizer_bytes(layout, plan, config.precision()) /
                         hw.rank_memory_bandwidth(ranks_per_node);
        t += seconds;
        p.optimizer_seconds += seconds;
        break;
      }
      case StepEvent::Type::issue:
        issued[e.collective] = true;
        if (hw.collective.async_progress) run(e.collective, t);
        break;
      case StepEvent::Type::wait:
        LLM_CHECK(issued[e.collective], "throughput model: collective waited before it was issued");
        if (ends[e.collective] < 0) run(e.collective, t);
        t = std::max(t, ends[e.collective]);
        break;
      case StepEvent::Type::gradient_final:
        p.gradient_final.push_back({e.unit, t});
        break;
    }
  }
  double largest[3] = {-1, -1, -1};
  for (size_t id = 0; id < collectives.size(); ++id) {
    const SizedCollective& c = collectives[id];
    if (!issued[id]) continue;  // a bucket member whose bucket was issued instead
    if (ends[id] < 0) run(static_cast<int>(id), t);  // never waited: finishes after the step
    t = std::max(t, ends[id]);
    p.comm_seconds += c.cost.seconds;
    if (c.scalar) continue;
    const int op = static_cast<int>(c.op);
    add_traffic(p.traffic[op], c.op, c.count, c.element_bytes,
                spans[static_cast<int>(c.group)].size);
    p.traffic[op].busy_seconds += c.cost.seconds;
    const double bytes = static_cast<double>(c.count) * c.element_bytes;
    if (bytes > largest[op]) {
      largest[op] = bytes;
      p.algorithm[op] = c.cost.name();
    }
  }
  p.contention_seconds = timeline.contention_seconds();
  p.overlapped_compute_seconds = timeline.overlapped_seconds();
  p.comm_in_flight_seconds = timeline.in_flight_seconds(t);
  // Pipeline: P - 1 idle slots of this stage's forward + backward (with its
  // tensor collectives), and two messages in line with each of the M + P - 1
  // slots, over the inter-node link when the pipeline group (ranks T x D
  // apart) spans nodes.
  const int M = trace.micro_batches;
  const double slot = (p.compute_seconds + p.tensor_comm_seconds) / M;
  p.pipeline_bubble_fraction = pipeline_bubble_fraction(P, M);
  p.pipeline_bubble_seconds = (P - 1) * slot;
  if (P > 1) {
    const bool across_nodes = static_cast<int64_t>(T) * D * (P - 1) >= hw.node.devices_per_node;
    const GroupSpan link{2, across_nodes ? 2 : 1, 1};
    p.pipeline_comm_seconds =
        2.0 * (M + P - 1) *
        point_to_point_seconds(link, static_cast<double>(pipeline_message_bytes(config)), hw);
  }
  p.pipeline_traffic = pipeline_step_traffic(config, M);
  t += p.pipeline_bubble_seconds + p.pipeline_comm_seconds;
  p.comm_seconds += p.pipeline_comm_seconds;
  p.step_seconds = t;
  p.exposed_comm_seconds = t - p.compute_seconds - p.contention_seconds - p.optimizer_seconds -
                           p.pipeline_bubble_seconds;
  if (p.exposed_comm_seconds < 1e-12 * t) p.exposed_comm_seconds = 0;  // nothing but rounding
  p.model_flops = step_flops(config).total();
  p.tflops_per_rank = p.model_flops / world / p.step_seconds / 1e12;
  return p;
}

}  // namespace llm
