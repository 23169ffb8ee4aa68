// The host executor of an offloaded optimizer (see host_optimizer.h).
#include "parallel/host_optimizer.h"

#include <chrono>

#include "base/error.h"

namespace llm {
namespace {

// Seconds `wait` took.
template <class Wait>
double seconds_of(Wait&& wait) {
  const auto start = std::chrono::steady_clock::now();
  wait();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void HostOptimizer::list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                                 bool accumulator, std::vector<Unit>& units, BufferPlan& host) {
  units = std::vector<Unit>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size(); ++u) {
    const size_t s = shards[u].shard;
    host.add(units[u].masters, s);
    host.add(units[u].m, s);
    host.add(units[u].v, s);
    host.add(units[u].grads, s);
    if (stores_bf16(precision)) host.add(units[u].compute, s);
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
      grads_reader_(shards.size(), 0),
      update_job_(shards.size(), 0),
      upload_mark_(shards.size(), 0),
      worker_(device.device == Device::cpu ? 1 : 0, /*yielding=*/device.device == Device::cpu) {
  BufferPlan plan;
  list_buffers(shards, precision_, config.zenflow.enabled, units_, plan);
  arena_ = Arena::staging("offloaded optimizer", plan.bytes(), *device.memory);
  plan.bind(arena_);
}

HostOptimizer::~HostOptimizer() {
  try {
    device_.memory->wait_for_transfers(last_mark_);
  } catch (...) {
    // Unwinding from a device error already being reported: nothing to add.
  }
}

OffloadStats HostOptimizer::stats() {
  OffloadStats now = stats_;
  now.host_seconds = worker_.busy_seconds();
  return now;
}

void HostOptimizer::wait_for_job(uint64_t job) {
  stats_.wait_seconds += seconds_of([&] { worker_.wait_for(job); });
}

void HostOptimizer::wait_for_worker() {
  stats_.wait_seconds += seconds_of([&] { worker_.wait(); });
  device_.memory->wait_for_transfers(last_mark_);
}

const HostOptimizer::GradsCopy* HostOptimizer::grads_copy(int u) const {
  for (const GradsCopy& copy : grads_copies_) {
    if (copy.unit == u) return &copy;
  }
  return nullptr;
}

const HostOptimizer::GradsCopy& HostOptimizer::copy_grads(int u) {
  const size_t bytes = shards_[u].owned * sizeof(float);
  device_.memory->to_host_queued(units_[u].grads, grads_.reduced(u), bytes);
  last_mark_ = device_.memory->transfer_mark();
  stats_.to_host_bytes += bytes;
  return grads_copies_.emplace_back(GradsCopy{u, last_mark_});
}

std::vector<int> HostOptimizer::landing_order() const {
  std::vector<int> order;
  for (const GradsCopy& copy : grads_copies_) order.push_back(copy.unit);
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!grads_copy(static_cast<int>(u))) order.push_back(static_cast<int>(u));
  }
  return order;
}

void HostOptimizer::gradient_final(int u) {
  if (grads_copy(u) || !worker_.finished(grads_reader_[u])) return;
  copy_grads(u);
  stats_.to_host_early_bytes += shards_[u].owned * sizeof(float);
}

void HostOptimizer::fetch_grads(int u) {
  const GradsCopy* copy = grads_copy(u);
  if (!copy) {
    wait_for_job(grads_reader_[u]);
    copy = &copy_grads(u);
  }
  device_.memory->wait_for_transfers(copy->mark);
  grads_copies_.erase(grads_copies_.begin() + (copy - grads_copies_.data()));
}

void HostOptimizer::begin_step() {
  for (const GradsCopy& copy : grads_copies_) device_.memory->wait_for_transfers(copy.mark);
  grads_copies_.clear();
}

void HostOptimizer::queue_update(int u, const AdamWStep& step, const float* grads) {
  const UnitShard& s = shards_[u];
  if (s.owned == 0) return;
  device_.memory->wait_for_transfers(upload_mark_[u]);  // the update rewrites what it uploads
  const uint64_t job = worker_.submit([this, u, step, grads, &s] {
    const Unit& state = units_[u];
    optimizer_update_slice(backend_cpu(), layout_, training_, step, u, s.begin, s.begin + s.owned,
                           state.masters, state.compute, grads, state.m, state.v);
  });
  update_job_[u] = job;
  if (grads == units_[u].grads) grads_reader_[u] = job;
}

void HostOptimizer::queue(std::function<void()> job, int reads_grads_of) {
  const uint64_t number = worker_.submit(std::move(job));
  if (reads_grads_of >= 0) grads_reader_[reads_grads_of] = number;
}

void HostOptimizer::publish(int u) {
  wait_for_job(update_job_[u]);
  const Unit& state = units_[u];
  const size_t owned = shards_[u].owned;
  const void* source = state.compute ? static_cast<const void*>(state.compute) : state.masters;
  const size_t bytes = owned * (state.compute ? sizeof(Bf16) : sizeof(float));
  device_.memory->to_device_queued(params_.owned_compute(u), source, bytes);
  last_mark_ = device_.memory->transfer_mark();
  upload_mark_[u] = last_mark_;
  stats_.to_device_bytes += bytes;
}

void HostOptimizer::upload_all(const std::vector<int>& order) {
  if (order.empty()) {
    for (size_t u = 0; u < units_.size(); ++u) publish(static_cast<int>(u));
  } else {
    for (int u : order) publish(u);
  }
  device_.memory->device_waits_for_transfers();
}

void HostOptimizer::publish_all(const std::vector<int>& order) {
  upload_all(order);
  params_.after_update();
}

void HostOptimizer::step(const AdamWStep& step) {
  publish_pending();
  // The worker updates each unit as soon as its gradient has landed, while
  // the later units' copies go on; the uploads follow in the same order.
  const std::vector<int> order = landing_order();
  for (int unit : order) {
    fetch_grads(unit);
    queue_update(unit, step, units_[unit].grads);
  }
  if (delayed_) {
    pending_ = true;
    pending_order_ = order;
    return;
  }
  publish_all(order);
}

void HostOptimizer::publish_pending() {
  if (!pending_) return;
  publish_all(pending_order_);
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
