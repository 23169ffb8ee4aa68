// The sharding engine (see sharding_engine.h for the contract).
#include "parallel/sharding_engine.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace llm {
namespace {

constexpr int kGatherSlots = 3;  // the unit in use + a prefetch, or head + tied embedding + a prefetch
constexpr int kGradSlots = 2;    // the unit in backward + the one still reducing
enum Category { kParams, kGrads, kOptimizer, kBuffers };

}  // namespace

std::vector<ShardingEngine::UnitShard> ShardingEngine::unit_shards(const ParameterLayout& layout,
                                                                   int group_size, int group_rank) {
  std::vector<UnitShard> shards;
  for (const UnitSpec& u : layout.units) {
    UnitShard s;
    s.numel = u.numel;
    s.shard = (u.numel + group_size - 1) / group_size;
    s.padded = s.shard * group_size;
    s.begin = s.shard * group_rank;
    s.owned = s.begin >= u.numel ? 0 : std::min(s.shard, u.numel - s.begin);
    shards.push_back(s);
  }
  return shards;
}

void ShardingEngine::plan_buffers(const std::vector<UnitShard>& shards, const ShardingPlan& plan,
                                  Precision precision, WireType reduce_type,
                                  std::vector<UnitState>* units, std::vector<GatherSlot>* gather,
                                  std::vector<GradSlot>* grad, BufferPlan out[4]) {
  const bool bf16 = precision == Precision::bf16, reduce_bf16 = reduce_type == WireType::bf16;
  *units = std::vector<UnitState>(shards.size());  // sized before slots are planned
  size_t max_padded = 0, max_shard = 0;
  for (size_t u = 0; u < shards.size(); ++u) {
    const UnitShard& s = shards[u];
    UnitState& state = (*units)[u];
    max_padded = std::max(max_padded, s.padded);
    max_shard = std::max(max_shard, s.shard);
    if (plan.shard_params) {
      out[kParams].add(state.owned_params, s.shard);
    } else {
      out[kParams].add(state.full_params, s.padded);
    }
    if (!plan.shard_grads) out[kGrads].add(state.local_grads, s.padded);
    if (plan.shard_optimizer) out[kGrads].add(state.reduced_grads, s.shard);
    out[kOptimizer].add(state.m, s.shard);
    out[kOptimizer].add(state.v, s.shard);
    if (bf16) out[kParams].add(state.compute, plan.shard_params ? s.shard : s.padded);
    if (reduce_bf16 && !plan.shard_grads) {
      out[kBuffers].add(state.reduce_bf16, s.padded);
      if (plan.shard_optimizer) out[kBuffers].add(state.landing_bf16, s.shard);
    }
  }
  const size_t compute_bytes = bf16 ? sizeof(Bf16) : sizeof(float);
  *gather = std::vector<GatherSlot>(plan.shard_params ? kGatherSlots : 0);
  for (GatherSlot& slot : *gather) out[kBuffers].add_bytes(slot.full, max_padded * compute_bytes);
  *grad = std::vector<GradSlot>(plan.shard_grads ? kGradSlots : 0);
  for (GradSlot& slot : *grad) {
    out[kBuffers].add(slot.full, max_padded);
    if (reduce_bf16) out[kBuffers].add(slot.send_bf16, max_padded);
    out[kBuffers].add_bytes(slot.landing, max_shard * wire_bytes(reduce_type));
  }
}

StateBytes ShardingEngine::planned_bytes(const ParameterLayout& layout, const ShardingPlan& plan,
                                         Precision precision, WireType reduce_type) {
  std::vector<UnitState> units;
  std::vector<GatherSlot> gather;
  std::vector<GradSlot> grad;
  BufferPlan plans[4];
  plan_buffers(unit_shards(layout, plan.shard_group_size, 0), plan, precision, reduce_type, &units,
               &gather, &grad, plans);
  return {plans[kParams].bytes(), plans[kGrads].bytes(), plans[kOptimizer].bytes(),
          plans[kBuffers].bytes()};
}

ShardingEngine::ShardingEngine(const ParameterLayout& layout, const Config& config,
                               const Backend& backend, Topology& topology)
    : layout_(layout),
      training_(config.training),
      be_(backend),
      topo_(topology),
      plan_(topology.plan),
      precision_(config.precision()),
      reduce_type_(reduce_wire_type(config.parallel)),
      compute_type_(precision_ == Precision::bf16 ? WireType::bf16 : WireType::f32),
      shards_(unit_shards(layout, topology.shard->size(), topology.shard->rank())) {
  BufferPlan plans[4];
  plan_buffers(shards_, plan_, precision_, reduce_type_, &units_, &gather_slots_, &grad_slots_,
               plans);
  const char* names[4] = {"parameters", "gradients", "optimizer", "buffers"};
  for (int c = 0; c < 4; ++c) {
    arenas_[c] = Arena(names[c], plans[c].bytes(), *be_.memory);
    plans[c].bind(arenas_[c]);
  }
  bytes_ = {arenas_[kParams].capacity(), arenas_[kGrads].capacity(),
            arenas_[kOptimizer].capacity(), arenas_[kBuffers].capacity()};
  // Initial parameters are computed on the host, slice by slice, and copied in.
  const uint64_t seed = static_cast<uint64_t>(config.training.seed);
  std::vector<float> host;
  for (size_t u = 0; u < units_.size(); ++u) {
    const UnitShard& s = shards_[u];
    int unit = static_cast<int>(u);
    const size_t begin = plan_.shard_params ? s.begin : 0;
    const size_t end = plan_.shard_params ? s.begin + s.owned : s.numel;
    host.assign(end - begin, 0.0f);
    layout_init_params(layout, config.model, seed, unit, begin, end, host.data());
    float* dst = plan_.shard_params ? units_[u].owned_params : units_[u].full_params;
    be_.memory->to_device(dst, host.data(), host.size() * sizeof(float));
    refresh_compute_copy(unit);
  }
}

void ShardingEngine::refresh_compute_copy(int unit) {
  UnitState& state = units_[unit];
  if (!state.compute) return;
  const UnitShard& s = shards_[unit];
  if (plan_.shard_params) {
    be_.cast_f32_to_bf16(state.compute, state.owned_params, s.shard);
  } else {
    be_.cast_f32_to_bf16(state.compute, state.full_params, s.padded);
  }
}

// --- parameters ----------------------------------------------------------------

ShardingEngine::GatherSlot* ShardingEngine::find_gather_slot(int unit) {
  for (GatherSlot& slot : gather_slots_) {
    if (slot.unit == unit) return &slot;
  }
  return nullptr;
}

ShardingEngine::GatherSlot& ShardingEngine::start_gather(int unit) {
  // Least recently used slot that nobody holds and that is not receiving.
  GatherSlot* victim = nullptr;
  for (GatherSlot& slot : gather_slots_) {
    if (slot.refs > 0 || slot.pending.pending()) continue;
    if (!victim || slot.last_use < victim->last_use) victim = &slot;
  }
  LLM_CHECK(victim, "sharding engine: no free gather buffer for unit {} ({} in use)",
            layout_.units[unit].name, gather_slots_.size());
  const UnitShard& s = shards_[unit];
  victim->unit = unit;
  const UnitState& state = units_[unit];
  const void* owned = state.compute ? static_cast<const void*>(state.compute) : state.owned_params;
  victim->pending = topo_.shard->all_gather_async(owned, victim->full, s.shard, compute_type_);
  return *victim;
}

void ShardingEngine::prefetch(int unit) {
  if (unit < 0 || unit >= static_cast<int>(units_.size()) || find_gather_slot(unit)) return;
  for (const GatherSlot& slot : gather_slots_) {
    if (slot.refs == 0 && !slot.pending.pending()) {
      start_gather(unit);
      return;
    }
  }
}

const void* ShardingEngine::acquire_params(int unit, Pass pass) {
  if (!plan_.shard_params) {
    const UnitState& state = units_[unit];
    return state.compute ? static_cast<const void*>(state.compute) : state.full_params;
  }
  bool alone = std::none_of(gather_slots_.begin(), gather_slots_.end(),
                            [](const GatherSlot& s) { return s.refs > 0; });
  GatherSlot* slot = find_gather_slot(unit);
  if (!slot) slot = &start_gather(unit);
  slot->pending.wait();
  slot->refs++;
  // Prefetch the next unit of this pass, unless this acquire is nested inside
  // another unit's (the tied embedding used by the head), which is off-order.
  if (alone) {
    int next = pass == Pass::forward ? unit + 1 : unit - 1;
    if (pass == Pass::backward && next == layout_.embed_unit()) next = -1;  // backward needs no embedding params
    prefetch(next);
  }
  return slot->full;
}

void ShardingEngine::release_params(int unit, Pass) {
  if (!plan_.shard_params) return;
  GatherSlot* slot = find_gather_slot(unit);
  LLM_CHECK(slot && slot->refs > 0, "sharding engine: unit {} released but not acquired",
            layout_.units[unit].name);
  slot->refs--;
  slot->last_use = ++clock_;
}

void ShardingEngine::gather_params(int unit, float* out) {
  const UnitShard& s = shards_[unit];
  if (!plan_.shard_params) {
    be_.memory->to_host(out, units_[unit].full_params, s.numel * sizeof(float));
    return;
  }
  Arena scratch("gathered parameters", s.padded * sizeof(float), *be_.memory);
  float* full = scratch.alloc<float>(s.padded);  // the fp32 masters, not the compute copy
  topo_.shard->all_gather(units_[unit].owned_params, full, s.shard, WireType::f32);
  be_.memory->to_host(out, full, s.numel * sizeof(float));
}

std::vector<float> ShardingEngine::gather_all_params() {
  std::vector<float> all(layout_.total_numel);
  size_t offset = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    gather_params(static_cast<int>(u), all.data() + offset);
    offset += shards_[u].numel;
  }
  return all;
}

std::vector<OwnedSlice> ShardingEngine::owned_slices() const {
  std::vector<OwnedSlice> slices;
  for (size_t u = 0; u < units_.size(); ++u) {
    const UnitShard& s = shards_[u];
    const UnitState& state = units_[u];
    if (s.owned == 0) continue;
    const float* params = plan_.shard_params ? state.owned_params : state.full_params + s.begin;
    slices.push_back({static_cast<int>(u), s.begin, s.owned, params, state.m, state.v});
  }
  return slices;
}

void ShardingEngine::load_state(StateSource& source, bool with_moments) {
  wait_gradients();
  // Reads a range into host buffers, then copies each wanted part to the device.
  std::vector<float> host[3];
  auto read = [&](int unit, size_t begin, size_t count, float* params, float* m, float* v) {
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
  for (size_t u = 0; u < units_.size(); ++u) {
    const UnitShard& s = shards_[u];
    UnitState& state = units_[u];
    int unit = static_cast<int>(u);
    float* m = with_moments ? state.m : nullptr;
    float* v = with_moments ? state.v : nullptr;
    if (plan_.shard_params) {
      if (s.owned > 0) read(unit, s.begin, s.owned, state.owned_params, m, v);
      continue;
    }
    read(unit, 0, s.numel, state.full_params, nullptr, nullptr);
    if (with_moments && s.owned > 0) read(unit, s.begin, s.owned, nullptr, m, v);
  }
  for (GatherSlot& slot : gather_slots_) slot.unit = -1;  // cached gathers are stale
  for (size_t u = 0; u < units_.size(); ++u) refresh_compute_copy(static_cast<int>(u));
}

// --- gradients -----------------------------------------------------------------

ShardingEngine::GradSlot* ShardingEngine::oldest_reduction() {
  GradSlot* oldest = nullptr;
  for (GradSlot& slot : grad_slots_) {
    if (slot.reducing && (!oldest || slot.released_at < oldest->released_at)) oldest = &slot;
  }
  return oldest;
}

ShardingEngine::GradSlot& ShardingEngine::free_grad_slot() {
  for (GradSlot& slot : grad_slots_) {
    if (slot.unit < 0) return slot;
  }
  // All slots busy: finish the oldest reduction in flight. Oldest first keeps
  // a unit's micro-batch contributions in order, so none is added after the
  // replica all-reduce of its last micro-batch has started.
  GradSlot* oldest = oldest_reduction();
  LLM_CHECK(oldest, "sharding engine: more than {} units hold gradient buffers at once",
            grad_slots_.size());
  complete_reduction(*oldest);
  return *oldest;
}

float* ShardingEngine::acquire_grads(int unit) {
  UnitState& state = units_[unit];
  if (!plan_.shard_grads) return state.local_grads;
  if (!state.grad_slot) {
    GradSlot& slot = free_grad_slot();
    slot.unit = unit;
    be_.fill_zero(slot.full, shards_[unit].padded);
    state.grad_slot = &slot;
  }
  return state.grad_slot->full;
}

void ShardingEngine::release_grads(int unit) {
  UnitState& state = units_[unit];
  const UnitShard& s = shards_[unit];
  if (!plan_.shard_grads) {
    if (!last_micro_batch_) return;  // keep accumulating locally
    const void* send = state.local_grads;
    if (state.reduce_bf16) {
      be_.cast_f32_to_bf16(state.reduce_bf16, state.local_grads, s.padded);
      send = state.reduce_bf16;
    }
    if (plan_.shard_optimizer) {  // zero1
      void* recv = state.landing_bf16 ? static_cast<void*>(state.landing_bf16) : state.reduced_grads;
      state.pending = topo_.shard->reduce_scatter_async(send, recv, s.shard, reduce_type_);
    } else {  // ddp
      state.pending = topo_.replicate->all_reduce_async(const_cast<void*>(send), s.padded, reduce_type_);
    }
    return;
  }
  GradSlot& slot = *state.grad_slot;
  state.grad_slot = nullptr;
  slot.reducing = true;
  slot.last_micro_batch = last_micro_batch_;
  slot.released_at = ++clock_;
  const void* send = slot.full;
  if (slot.send_bf16) {
    be_.cast_f32_to_bf16(slot.send_bf16, slot.full, s.padded);
    send = slot.send_bf16;
  }
  slot.pending = topo_.shard->reduce_scatter_async(send, slot.landing, s.shard, reduce_type_);
}

void ShardingEngine::unpack_bf16_reduction(int unit) {
  UnitState& state = units_[unit];
  if (!state.reduce_bf16) return;
  const UnitShard& s = shards_[unit];
  if (state.landing_bf16) {
    be_.cast_bf16_to_f32(state.reduced_grads, state.landing_bf16, s.shard);
  } else {
    be_.cast_bf16_to_f32(state.local_grads, state.reduce_bf16, s.padded);
  }
}

void ShardingEngine::complete_reduction(GradSlot& slot) {
  slot.pending.wait();
  const int unit = slot.unit;
  UnitState& state = units_[unit];
  const size_t n = shards_[unit].shard;
  // Add the micro-batch's reduced shard through the backend (so this works on
  // any device); a bf16 result is widened first into the slot's fp32 buffer,
  // which the finished reduce-scatter no longer needs.
  const float* landing = static_cast<const float*>(slot.landing);
  if (reduce_type_ == WireType::bf16) {
    be_.cast_bf16_to_f32(slot.full, static_cast<const Bf16*>(slot.landing), n);
    landing = slot.full;
  }
  be_.residual_forward(state.reduced_grads, state.reduced_grads, landing, n);
  if (slot.last_micro_batch && topo_.replicate->size() > 1) {
    state.pending = topo_.replicate->all_reduce_async(state.reduced_grads, n, WireType::f32);
  }
  slot.unit = -1;
  slot.reducing = false;
}

void ShardingEngine::wait_gradients() {
  while (GradSlot* slot = oldest_reduction()) complete_reduction(*slot);
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!units_[u].pending.pending()) continue;
    units_[u].pending.wait();
    if (!plan_.shard_grads) unpack_bf16_reduction(static_cast<int>(u));
  }
}

void ShardingEngine::zero_grads() {
  wait_gradients();
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u].local_grads) be_.fill_zero(units_[u].local_grads, shards_[u].padded);
    if (units_[u].reduced_grads) be_.fill_zero(units_[u].reduced_grads, shards_[u].shard);
  }
}

void ShardingEngine::gather_grads(int unit, float* out) {
  wait_gradients();
  const UnitShard& s = shards_[unit];
  if (!plan_.shard_optimizer) {
    be_.memory->to_host(out, units_[unit].local_grads, s.numel * sizeof(float));
    return;
  }
  Arena scratch("gathered gradients", s.padded * sizeof(float), *be_.memory);
  float* full = scratch.alloc<float>(s.padded);
  topo_.shard->all_gather(units_[unit].reduced_grads, full, s.shard, WireType::f32);
  be_.memory->to_host(out, full, s.numel * sizeof(float));
}

float ShardingEngine::grad_norm() {
  wait_gradients();
  double sum = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    const UnitShard& s = shards_[u];
    // ddp: the full gradient, identical on every rank; otherwise the owned slice.
    sum += plan_.shard_optimizer ? be_.sum_squares(units_[u].reduced_grads, s.owned)
                                 : be_.sum_squares(units_[u].local_grads, s.numel);
  }
  if (plan_.shard_optimizer) sum = topo_.shard->all_reduce_sum(sum);
  return static_cast<float>(std::sqrt(sum));
}

void ShardingEngine::optimizer_step(const AdamWStep& step) {
  wait_gradients();
  for (size_t u = 0; u < units_.size(); ++u) {
    const UnitShard& s = shards_[u];
    UnitState& state = units_[u];
    if (s.owned == 0) continue;
    float* params = plan_.shard_params ? state.owned_params : state.full_params + s.begin;
    const float* grads = plan_.shard_optimizer ? state.reduced_grads : state.local_grads;
    optimizer_update_slice(be_, layout_, training_, step, static_cast<int>(u), s.begin,
                           s.begin + s.owned, params, grads, state.m, state.v);
  }
  if (plan_.shard_params) {
    for (GatherSlot& slot : gather_slots_) slot.unit = -1;  // cached gathers are stale
  } else if (plan_.shard_optimizer) {
    std::vector<CommHandle> gathers;
    for (size_t u = 0; u < units_.size(); ++u) {
      const UnitShard& s = shards_[u];
      float* full = units_[u].full_params;
      gathers.push_back(topo_.shard->all_gather_async(full + s.begin, full, s.shard, WireType::f32));
    }
    for (CommHandle& gather : gathers) gather.wait();
  }
  for (size_t u = 0; u < units_.size(); ++u) refresh_compute_copy(static_cast<int>(u));
}

}  // namespace llm
