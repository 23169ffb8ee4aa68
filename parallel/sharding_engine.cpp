// The sharding engine (see sharding_engine.h for the contract).
#include "parallel/sharding_engine.h"

#include <cmath>

#include "runtime/error.h"

namespace llm {
namespace {

enum Category { kParams, kGrads, kOptimizer, kBuffers };

}  // namespace

void ShardingEngine::list_buffers(const std::vector<UnitShard>& shards,
                                  std::vector<Moments>& moments, double*& unit_square_sums,
                                  StatePlans& plans) {
  moments = std::vector<Moments>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size(); ++u) {
    plans.optimizer.add(moments[u].m, shards[u].shard);
    plans.optimizer.add(moments[u].v, shards[u].shard);
  }
  plans.grads.add(unit_square_sums, shards.size());
}

StateBytes ShardingEngine::planned_bytes(const ParameterLayout& layout, const ShardingPlan& plan,
                                         Precision precision, WireType reduce_type) {
  const std::vector<UnitShard> shards = unit_shards(layout, plan.shard_group_size, 0);
  StatePlans plans;
  std::vector<Moments> moments;
  double* unit_square_sums = nullptr;
  list_buffers(shards, moments, unit_square_sums, plans);
  StateBytes bytes = plans.bytes();
  bytes += param_store_bytes(shards, plan, precision);
  bytes += grad_store_bytes(shards, plan, reduce_type);
  return bytes;
}

ShardingEngine::ShardingEngine(const ParameterLayout& layout, const Config& config,
                               const Backend& backend, Topology& topology)
    : layout_(layout),
      training_(config.training),
      be_(backend),
      topo_(topology),
      plan_(topology.plan),
      shards_(unit_shards(layout, topology.shard->size(), topology.shard->rank())) {
  const StoreContext context{layout_, shards_, be_, topo_};
  StatePlans plans;
  list_buffers(shards_, moments_, unit_square_sums_, plans);
  host_unit_square_sums_.resize(shards_.size());
  params_ = make_param_store(context, plan_, config.precision(), plans);
  grads_ = make_grad_store(context, plan_, reduce_wire_type(config.parallel), plans);
  const BufferPlan* by_category[4] = {&plans.params, &plans.grads, &plans.optimizer,
                                      &plans.buffers};
  const char* names[4] = {"parameters", "gradients", "optimizer", "buffers"};
  for (int c = 0; c < 4; ++c) {
    arenas_[c] = Arena(names[c], by_category[c]->bytes(), *be_.memory);
    by_category[c]->bind(arenas_[c]);
  }
  bytes_ = {arenas_[kParams].capacity(), arenas_[kGrads].capacity(),
            arenas_[kOptimizer].capacity(), arenas_[kBuffers].capacity()};
  // Initial parameters are computed on the host, slice by slice, and copied in.
  const uint64_t seed = static_cast<uint64_t>(config.training.seed);
  std::vector<float> host;
  for (size_t u = 0; u < shards_.size(); ++u) {
    const HeldParams held = params_->held(static_cast<int>(u));
    host.assign(held.count, 0.0f);
    layout_init_params(layout, config.model, seed, static_cast<int>(u), held.begin,
                       held.begin + held.count, host.data());
    be_.memory->to_device(held.data, host.data(), host.size() * sizeof(float));
  }
  params_->after_load();
}

float* ShardingEngine::owned_params(int unit) const {
  const HeldParams held = params_->held(unit);
  return held.data + (shards_[unit].begin - held.begin);
}

// --- the model's side ----------------------------------------------------------

const void* ShardingEngine::acquire_params(int unit, Pass pass) {
  return params_->acquire(unit, pass);
}

void ShardingEngine::release_params(int unit, Pass) { params_->release(unit); }

float* ShardingEngine::acquire_grads(int unit) { return grads_->acquire(unit); }

void ShardingEngine::release_grads(int unit) { grads_->release(unit, last_micro_batch_); }

// --- state as a whole ----------------------------------------------------------

void ShardingEngine::gather_params(int unit, float* out) { params_->gather(unit, out); }

std::vector<float> ShardingEngine::gather_all_params() {
  std::vector<float> all(layout_.total_numel);
  size_t offset = 0;
  for (size_t u = 0; u < shards_.size(); ++u) {
    gather_params(static_cast<int>(u), all.data() + offset);
    offset += shards_[u].numel;
  }
  return all;
}

std::vector<OwnedSlice> ShardingEngine::owned_slices() const {
  std::vector<OwnedSlice> slices;
  for (size_t u = 0; u < shards_.size(); ++u) {
    const UnitShard& s = shards_[u];
    if (s.owned == 0) continue;
    const int unit = static_cast<int>(u);
    slices.push_back({unit, s.begin, s.owned, owned_params(unit), moments_[u].m, moments_[u].v});
  }
  return slices;
}

void ShardingEngine::load_state(StateSource& source, bool with_moments) {
  grads_->wait();
  // Reads a range into host buffers, then copies each wanted part to the device.
  std::vector<float> host[3];
  auto read = [&](int unit, size_t begin, size_t count, float* params, float* m, float* v) {
    if (count == 0) return;
    float* device[3] = {params, m, v};
    float* staged[3];
    for (int i = 0; i < 3; ++i) {
      if (device[i]) host[i].resize(count);
      staged[i] = device[i] ? host[i].data() : nullptr;
    }
    source.read(unit, begin, count, staged[0], staged[1], staged[2]);
    for (int i = 0; i < 3; ++i) {
      if (device[i]) be_.memory->to_device(device[i], staged[i], count * sizeof(float));
    }
  };
  for (size_t u = 0; u < shards_.size(); ++u) {
    const UnitShard& s = shards_[u];
    const int unit = static_cast<int>(u);
    const HeldParams held = params_->held(unit);
    read(unit, held.begin, held.count, held.data, nullptr, nullptr);
    if (with_moments) read(unit, s.begin, s.owned, nullptr, moments_[u].m, moments_[u].v);
  }
  params_->after_load();
}

// --- the step ------------------------------------------------------------------

void ShardingEngine::zero_grads() {
  grads_->wait();
  grads_->zero();
}

void ShardingEngine::gather_grads(int unit, float* out) {
  grads_->wait();
  const UnitShard& s = shards_[unit];
  if (!plan_.shard_optimizer) {
    be_.memory->to_host(out, grads_->reduced(unit), s.numel * sizeof(float));
    return;
  }
  gather_unit_to_host(*topo_.shard, *be_.memory, s, grads_->reduced(unit), out,
                      "gathered gradients");
}

float ShardingEngine::grad_norm() {
  grads_->wait();
  for (size_t u = 0; u < shards_.size(); ++u) {
    // ddp: the full gradient, identical on every rank (it owns all of it);
    // otherwise the owned slice.
    be_.sum_squares(unit_square_sums_ + u, grads_->reduced(static_cast<int>(u)), shards_[u].owned);
  }
  be_.memory->to_host(host_unit_square_sums_.data(), unit_square_sums_,
                      shards_.size() * sizeof(double));
  double sum = 0;
  for (double unit_sum : host_unit_square_sums_) sum += unit_sum;  // in unit order
  if (plan_.shard_optimizer) sum = topo_.shard->all_reduce_sum(sum);
  return static_cast<float>(std::sqrt(sum));
}

void ShardingEngine::optimizer_step(const AdamWStep& step) {
  grads_->wait();
  for (size_t u = 0; u < shards_.size(); ++u) {
    const UnitShard& s = shards_[u];
    const int unit = static_cast<int>(u);
    if (s.owned == 0) continue;
    optimizer_update_slice(be_, layout_, training_, step, unit, s.begin, s.begin + s.owned,
                           owned_params(unit), params_->optimizer_compute_copy(unit),
                           grads_->reduced(unit), moments_[u].m, moments_[u].v);
  }
  params_->after_update();
}

}  // namespace llm
