// The sharding engine (see sharding_engine.h for the contract).
#include "parallel/sharding_engine.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace llm {
namespace {

enum Category { kParams, kGrads, kOptimizer, kBuffers };

}  // namespace

std::vector<ShardingEngine::NormRange> ShardingEngine::norm_ranges(
    const ParameterLayout& layout, const std::vector<UnitShard>& shards) {
  std::vector<NormRange> ranges;
  const bool skip_replicated = layout.slice.tp_rank > 0;
  for (size_t u = 0; u < shards.size(); ++u) {
    const UnitShard& s = shards[u];
    const int unit = static_cast<int>(u);
    size_t at = s.begin;  // the owned elements not yet listed start here
    auto add_until = [&](size_t end) {
      if (end > at) ranges.push_back({unit, at, end - at});
      at = std::max(at, end);
    };
    for (int ti : layout.units[u].tensors) {
      const TensorSpec& t = layout.tensors[ti];
      if (!skip_replicated || !t.replicated) continue;
      add_until(std::min(t.offset, s.begin + s.owned));
      at = std::max(at, std::min(t.offset + t.numel, s.begin + s.owned));
    }
    add_until(s.begin + s.owned);
  }
  return ranges;
}

void ShardingEngine::list_buffers(const std::vector<UnitShard>& shards, size_t norm_range_count,
                                  bool offloaded, std::vector<Moments>& moments,
                                  double*& square_sums, StatePlans& plans) {
  moments = std::vector<Moments>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size() && !offloaded; ++u) {
    plans.optimizer.add(moments[u].m, shards[u].shard);
    plans.optimizer.add(moments[u].v, shards[u].shard);
  }
  plans.grads.add(square_sums, norm_range_count);
}

StateBytes ShardingEngine::planned_bytes(const ParameterLayout& layout, const ShardingPlan& plan,
                                         const Config& config) {
  const std::vector<UnitShard> shards = unit_shards(layout, plan.shard_group_size, 0);
  const bool offloaded = config.offloads_optimizer();
  StatePlans plans;
  std::vector<Moments> moments;
  double* square_sums = nullptr;
  list_buffers(shards, norm_ranges(layout, shards).size(), offloaded, moments, square_sums, plans);
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
      shards_(unit_shards(layout, topology.shard->size(), topology.shard->rank())),
      norm_ranges_(norm_ranges(layout, shards_)) {
  const bool offloaded = config.offloads_optimizer();
  const StoreContext context{layout_, shards_, be_, topo_};
  StatePlans plans;
  list_buffers(shards_, norm_ranges_.size(), offloaded, moments_, square_sums_, plans);
  host_square_sums_.resize(norm_ranges_.size());
  params_ = make_param_store(context, plan_, config.precision(),
                             offloaded ? Masters::offloaded : Masters::on_device, plans);
  grads_ = make_grad_store(context, plan_, reduce_wire_type(config.parallel), plans);
  if (offloaded) {
    host_ = std::make_unique<HostOptimizer>(layout_, config, shards_, be_, *params_, *grads_);
  }
  grads_->on_final([this](int unit) {
    if (host_) host_->gradient_final(unit);
    if (final_observer_) final_observer_(unit);
  });
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
  bytes_ = {arenas_[kParams].capacity(), arenas_[kGrads].capacity(), arenas_[kOptimizer].capacity(),
            arenas_[kBuffers].capacity(), host_ ? host_->bytes() : 0};
  // Initial parameters are computed on the host, slice by slice, and copied in.
  const uint64_t seed = static_cast<uint64_t>(config.training.seed);
  write_state(
      [&](int unit, size_t begin, size_t count, float* params, float*, float*) {
        layout_init_params(layout, config.model, seed, unit, begin, begin + count, params);
      },
      /*with_moments=*/false);
}

template <class Fill>
void ShardingEngine::write_state(Fill&& fill, bool with_moments) {
  ++params_version_;
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
  // Unit offsets of the whole model, whose units are this layout's units.
  std::vector<size_t> global_unit_offset(layout_.units.size() + 1, 0);
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    global_unit_offset[u + 1] = global_unit_offset[u] + layout_.units[u].global_numel;
  }
  // Each tensor-parallel rank of each stage places its slice (replicated
  // tensors: the first tensor-parallel rank alone) into zeros; a sum over the
  // model-parallel group assembles the model.
  std::vector<float> all(global_unit_offset.back(), 0.0f), unit;
  const bool first = layout_.slice.tp_rank == 0;
  for (size_t u = 0; u < shards_.size(); ++u) {
    unit.resize(shards_[u].numel);
    gather_params(static_cast<int>(u), unit.data());
    for (const GlobalRun& run : layout_global_runs(layout_, static_cast<int>(u), 0, unit.size())) {
      if (run.replicated && !first) continue;
      for (size_t i = 0; i < run.repeats; ++i) {
        std::copy_n(unit.data() + run.local + i * run.length, run.length,
                    all.data() + global_unit_offset[run.unit] + run.begin + i * run.stride);
      }
    }
  }
  if (topo_.model_parallel->size() > 1) {
    // The group talks device memory (NCCL, or the staged group, on a GPU).
    Arena scratch("assembled parameters", all.size() * sizeof(float), *be_.memory);
    float* device = scratch.alloc<float>(all.size());
    be_.memory->to_device(device, all.data(), all.size() * sizeof(float));
    topo_.model_parallel->all_reduce(device, all.size(), WireType::f32);
    be_.memory->to_host(all.data(), device, all.size() * sizeof(float));
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
      slices.push_back(
          {unit, s.begin, s.owned, owned_params(unit), moments_[u].m, moments_[u].v, be_.memory});
    }
  }
  return slices;
}

void ShardingEngine::load_state(StateSource& source, bool with_moments) {
  grads_->wait();
  // Local ranges are read as the whole model's runs.
  auto at = [](float* p, size_t offset) { return p ? p + offset : nullptr; };
  write_state(
      [&](int unit, size_t begin, size_t count, float* params, float* m, float* v) {
        for (const GlobalRun& run : layout_global_runs(layout_, unit, begin, count)) {
          for (size_t i = 0; i < run.repeats; ++i) {
            const size_t local = run.local + i * run.length;
            source.read(run.unit, run.begin + i * run.stride, run.length, at(params, local),
                        at(m, local), at(v, local));
          }
        }
      },
      with_moments);
}

size_t ShardingEngine::load_elements(bool with_moments) const {
  // What write_state fills: the host optimizer's owned masters, or the
  // parameters this rank holds; and the owned moments.
  size_t elements = 0;
  for (size_t u = 0; u < shards_.size(); ++u) {
    const size_t owned = shards_[u].owned;
    elements += host_ ? owned : params_->held(static_cast<int>(u)).count;
    if (with_moments) elements += 2 * owned;
  }
  return elements;
}

// --- the step ------------------------------------------------------------------

void ShardingEngine::zero_grads() {
  grads_->wait();
  if (host_) host_->begin_step();
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
  for (size_t i = 0; i < norm_ranges_.size(); ++i) {
    // ddp: the full gradient, identical on every data-parallel rank (it owns
    // all of it); otherwise the owned slice, which reduced() starts at.
    const NormRange& r = norm_ranges_[i];
    be_.sum_squares(square_sums_ + i, grads_->reduced(r.unit) + (r.begin - shards_[r.unit].begin),
                    r.count);
  }
  be_.memory->to_host(host_square_sums_.data(), square_sums_, norm_ranges_.size() * sizeof(double));
  double sum = 0;
  for (double range_sum : host_square_sums_) sum += range_sum;  // in unit order
  if (topo_.model_copy->size() > 1) sum = topo_.model_copy->all_reduce_sum(sum);
  return static_cast<float>(std::sqrt(sum));
}

void ShardingEngine::optimizer_step(const AdamWStep& step) {
  ++params_version_;
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
  ++params_version_;
  if (zenflow_)
    zenflow_->settle();
  else if (host_)
    host_->publish_pending();
}

OffloadStats ShardingEngine::offload_stats() const {
  return host_ ? host_->stats() : OffloadStats{};
}

}  // namespace llm
