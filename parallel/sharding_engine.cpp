// The sharding engine (see sharding_engine.h for the contract).
#include "parallel/sharding_engine.h"

#include <cmath>

#include "runtime/error.h"

namespace llm {
namespace {

enum Category { kParams, kGrads, kOptimizer, kBuffers };

}  // namespace

void ShardingEngine::list_buffers(const std::vector<UnitShard>& shards, bool offloaded,
                                  std::vector<Moments>& moments, double*& unit_square_sums,
                                  StatePlans& plans) {
  moments = std::vector<Moments>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size() && !offloaded; ++u) {
    plans.optimizer.add(moments[u].m, shards[u].shard);
    plans.optimizer.add(moments[u].v, shards[u].shard);
  }
  plans.grads.add(unit_square_sums, shards.size());
}

StateBytes ShardingEngine::planned_bytes(const ParameterLayout& layout, const ShardingPlan& plan,
                                         const Config& config) {
  const std::vector<UnitShard> shards = unit_shards(layout, plan.shard_group_size, 0);
  const bool offloaded = config.offloads_optimizer();
  StatePlans plans;
  std::vector<Moments> moments;
  double* unit_square_sums = nullptr;
  list_buffers(shards, offloaded, moments, unit_square_sums, plans);
  std::vector<ZenFlow::Piece> pieces;
  float* norms = nullptr;
  if (config.zenflow.enabled) {
    ZenFlow::list_buffers(layout, shards, config.zenflow.topk_ratio, pieces, norms, plans);
  }
  StateBytes bytes = plans.bytes();
  bytes += param_store_bytes(shards, plan, config.precision(),
                             offloaded ? Masters::offloaded : Masters::on_device);
  bytes += grad_store_bytes(shards, plan, reduce_wire_type(config.parallel));
  if (offloaded) {
    BufferPlan host;
    std::vector<HostOptimizer::Unit> units;
    HostOptimizer::list_buffers(shards, config.precision(), config.zenflow.enabled, units, host);
    bytes.host = host.bytes();
  }
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
  const bool offloaded = config.offloads_optimizer();
  const StoreContext context{layout_, shards_, be_, topo_};
  StatePlans plans;
  list_buffers(shards_, offloaded, moments_, unit_square_sums_, plans);
  host_unit_square_sums_.resize(shards_.size());
  params_ = make_param_store(context, plan_, config.precision(),
                             offloaded ? Masters::offloaded : Masters::on_device, plans);
  grads_ = make_grad_store(context, plan_, reduce_wire_type(config.parallel), plans);
  if (offloaded) {
    host_ = std::make_unique<HostOptimizer>(layout_, config, shards_, be_, *params_, *grads_);
  }
  if (config.zenflow.enabled) {
    zenflow_ = std::make_unique<ZenFlow>(layout_, config, shards_, be_, topo_, *params_, *grads_,
                                         *host_, plans);
  }
  const BufferPlan* by_category[4] = {&plans.params, &plans.grads, &plans.optimizer,
                                      &plans.buffers};
  const char* names[4] = {"parameters", "gradients", "optimizer", "buffers"};
  for (int c = 0; c < 4; ++c) {
    arenas_[c] = Arena(names[c], by_category[c]->bytes(), *be_.memory);
    by_category[c]->bind(arenas_[c]);
  }
  bytes_ = {arenas_[kParams].capacity(), arenas_[kGrads].capacity(),
            arenas_[kOptimizer].capacity(), arenas_[kBuffers].capacity(),
            host_ ? host_->bytes() : 0};
  // Initial parameters are computed on the host, slice by slice, and copied in.
  const uint64_t seed = static_cast<uint64_t>(config.training.seed);
  write_state(
      [&](int unit, size_t begin, size_t count, float* params, float*, float*) {
        layout_init_params(layout, config.model, seed, unit, begin, begin + count, params);
      },
      /*with_moments=*/false);
}

template <class Fill> void ShardingEngine::write_state(Fill&& fill, bool with_moments) {
  if (host_) {
    // The host optimizer's slices are written in place, then published.
    if (zenflow_) zenflow_->reset();
    host_->wait_for_worker();
    for (size_t u = 0; u < shards_.size(); ++u) {
      const UnitShard& s = shards_[u];
      const HostOptimizer::Unit& h = host_->unit(static_cast<int>(u));
      if (s.owned == 0) continue;
      fill(static_cast<int>(u), s.begin, s.owned, h.masters, with_moments ? h.m : nullptr,
           with_moments ? h.v : nullptr);
      if (h.compute) backend_cpu().cast_f32_to_bf16(h.compute, h.masters, s.owned);
    }
    host_->publish_all();
    return;
  }
  // Fills host buffers for a range, then copies each wanted part to the device.
  std::vector<float> host[3];
  auto write = [&](int unit, size_t begin, size_t count, float* params, float* m, float* v) {
    if (count == 0) return;
    float* device[3] = {params, m, v};
    float* staged[3];
    for (int i = 0; i < 3; ++i) {
      if (device[i]) host[i].resize(count);
      staged[i] = device[i] ? host[i].data() : nullptr;
    }
    fill(unit, begin, count, staged[0], staged[1], staged[2]);
    for (int i = 0; i < 3; ++i) {
      if (device[i]) be_.memory->to_device(device[i], staged[i], count * sizeof(float));
    }
  };
  for (size_t u = 0; u < shards_.size(); ++u) {
    const UnitShard& s = shards_[u];
    const int unit = static_cast<int>(u);
    const HeldParams held = params_->held(unit);
    write(unit, held.begin, held.count, held.data, nullptr, nullptr);
    if (with_moments) write(unit, s.begin, s.owned, nullptr, moments_[u].m, moments_[u].v);
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

void ShardingEngine::gather_params(int unit, float* out) {
  if (!host_) {
    params_->gather(unit, out);
    return;
  }
  host_->wait_for_worker();
  const float* owned = host_->unit(unit).masters;
  std::vector<float> current;
  if (zenflow_) {
    current.resize(shards_[unit].owned);
    zenflow_->current_masters(unit, current.data());
    owned = current.data();
  }
  host_->gather_masters(*topo_.shard, unit, owned, out);
}

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
  LLM_CHECK(!host_ || (host_->settled() && (!zenflow_ || zenflow_->settled())),
            "sharding engine: the offloaded optimizer has deferred work; settle() first");
  std::vector<OwnedSlice> slices;
  for (size_t u = 0; u < shards_.size(); ++u) {
    const UnitShard& s = shards_[u];
    if (s.owned == 0) continue;
    const int unit = static_cast<int>(u);
    if (host_) {
      const HostOptimizer::Unit& h = host_->unit(unit);
      slices.push_back({unit, s.begin, s.owned, h.masters, h.m, h.v, &host_memory()});
    } else {
      slices.push_back({unit, s.begin, s.owned, owned_params(unit), moments_[u].m, moments_[u].v,
                        be_.memory});
    }
  }
  return slices;
}

void ShardingEngine::load_state(StateSource& source, bool with_moments) {
  grads_->wait();
  write_state([&](int unit, size_t begin, size_t count, float* params, float* m,
                  float* v) { source.read(unit, begin, count, params, m, v); },
              with_moments);
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
  if (zenflow_) return zenflow_->step(step);
  if (host_) return host_->step(step);
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

void ShardingEngine::settle() {
  if (zenflow_) zenflow_->settle();
  else if (host_) host_->publish_pending();
}

OffloadStats ShardingEngine::offload_stats() const { return host_ ? host_->stats() : OffloadStats{}; }

}  // namespace llm
