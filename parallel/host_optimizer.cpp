// The host executor of an offloaded optimizer (see host_optimizer.h).
#include "parallel/host_optimizer.h"

#include <chrono>

#include "runtime/error.h"

namespace llm {

void HostOptimizer::list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                                 bool accumulator, std::vector<Unit>& units, BufferPlan& host) {
  units = std::vector<Unit>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size(); ++u) {
    const size_t s = shards[u].shard;
    host.add(units[u].masters, s);
    host.add(units[u].m, s);
    host.add(units[u].v, s);
    host.add(units[u].grads, s);
    if (precision == Precision::bf16) host.add(units[u].compute, s);
    if (accumulator) host.add(units[u].accumulated, s);
  }
}

HostOptimizer::HostOptimizer(const ParameterLayout& layout, const Config& config,
                             const std::vector<UnitShard>& shards, const Backend& device,
                             ParamStore& params, GradStore& grads)
    : layout_(layout),
      training_(config.training),
      shards_(shards),
      device_(device),
      params_(params),
      grads_(grads),
      precision_(config.precision()),
      delayed_(config.offload.delayed_update),
      worker_(device.device == Device::cpu ? 1 : 0, /*yielding=*/device.device == Device::cpu) {
  BufferPlan plan;
  list_buffers(shards, precision_, config.zenflow.enabled, units_, plan);
  arena_ = Arena::staging("offloaded optimizer", plan.bytes(), *device.memory);
  plan.bind(arena_);
}

OffloadStats HostOptimizer::stats() {
  OffloadStats now = stats_;
  now.host_seconds = worker_.busy_seconds();
  return now;
}

void HostOptimizer::wait_for_worker() {
  const auto start = std::chrono::steady_clock::now();
  worker_.wait();
  const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
  stats_.wait_seconds += waited.count();
}

void HostOptimizer::fetch_grads(int u) {
  const size_t bytes = shards_[u].owned * sizeof(float);
  device_.memory->to_host(units_[u].grads, grads_.reduced(u), bytes);
  stats_.to_host_bytes += bytes;
}

void HostOptimizer::queue_update(int u, const AdamWStep& step, const float* grads) {
  const UnitShard& s = shards_[u];
  if (s.owned == 0) return;
  worker_.submit([this, u, step, grads, &s] {
    const Unit& state = units_[u];
    optimizer_update_slice(backend_cpu(), layout_, training_, step, u, s.begin, s.begin + s.owned,
                           state.masters, state.compute, grads, state.m, state.v);
  });
}

void HostOptimizer::publish(int u) {
  const Unit& state = units_[u];
  const size_t owned = shards_[u].owned;
  const void* source = state.compute ? static_cast<const void*>(state.compute) : state.masters;
  const size_t bytes = owned * (state.compute ? sizeof(Bf16) : sizeof(float));
  device_.memory->to_device_async(params_.owned_compute(u), source, bytes);
  stats_.to_device_bytes += bytes;
}

void HostOptimizer::publish_all() {
  for (size_t u = 0; u < units_.size(); ++u) publish(static_cast<int>(u));
  params_.after_update();
}

void HostOptimizer::step(const AdamWStep& step) {
  publish_pending();
  // The worker updates unit u while this thread copies unit u + 1's gradient.
  for (size_t u = 0; u < units_.size(); ++u) {
    const int unit = static_cast<int>(u);
    fetch_grads(unit);
    queue_update(unit, step, units_[u].grads);
  }
  if (delayed_) {
    pending_ = true;
    return;
  }
  wait_for_worker();
  publish_all();
}

void HostOptimizer::publish_pending() {
  if (!pending_) return;
  wait_for_worker();
  publish_all();
  pending_ = false;
}

void HostOptimizer::gather_masters(Group& shard_group, int u, const float* owned, float* out) {
  const UnitShard& s = shards_[u];
  if (shard_group.size() == 1) {
    std::copy(owned, owned + s.numel, out);
    return;
  }
  // The collective runs in the device's memory: stage the owned slice there.
  Arena scratch("gathered offloaded parameters", s.shard * sizeof(float), *device_.memory);
  float* shard = scratch.alloc<float>(s.shard);
  device_.memory->to_device(shard, owned, s.owned * sizeof(float));
  gather_unit_to_host(shard_group, *device_.memory, s, shard, out, "gathered parameters");
}

}  // namespace llm
