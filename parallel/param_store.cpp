// The parameter stores (see param_store.h for the contract).
#include "parallel/param_store.h"

#include <algorithm>

#include "runtime/error.h"

namespace llm {
namespace {

constexpr int kGatherSlots = 3;  // the unit in use + a prefetch, or head + tied embedding + a prefetch

}  // namespace

std::unique_ptr<ParamStore> make_param_store(const StoreContext& context, const ShardingPlan& plan,
                                             Precision precision, StatePlans& plans) {
  if (plan.shard_params) return std::make_unique<ShardedParams>(context, precision, plans);
  return std::make_unique<ReplicatedParams>(context, precision, plan.shard_optimizer, plans);
}

StateBytes param_store_bytes(const std::vector<UnitShard>& shards, const ShardingPlan& plan,
                             Precision precision) {
  StatePlans plans;
  if (plan.shard_params) {
    std::vector<ShardedParams::Unit> units;
    std::vector<ShardedParams::GatherSlot> slots;
    ShardedParams::list_buffers(shards, precision, units, slots, plans);
    return plans.bytes();
  }
  std::vector<ReplicatedParams::Unit> units;
  ReplicatedParams::list_buffers(shards, precision, units, plans);
  return plans.bytes();
}

// --- replicated parameters -------------------------------------------------------

void ReplicatedParams::list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                                    std::vector<Unit>& units, StatePlans& plans) {
  units = std::vector<Unit>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size(); ++u) {
    plans.params.add(units[u].full_params, shards[u].padded);
    if (precision == Precision::bf16) plans.params.add(units[u].compute, shards[u].padded);
  }
}

ReplicatedParams::ReplicatedParams(const StoreContext& context, Precision precision,
                                   bool gather_after_update, StatePlans& plans)
    : shards_(context.shards),
      be_(context.backend),
      topo_(context.topology),
      gather_after_update_(gather_after_update) {
  list_buffers(context.shards, precision, units_, plans);
}

void ReplicatedParams::refresh_compute_copy(int unit) {
  Unit& state = units_[unit];
  if (!state.compute) return;
  const UnitShard& s = shards_[unit];
  be_.cast_f32_to_bf16(state.compute, state.full_params, s.padded);
}

const void* ReplicatedParams::acquire(int unit, Pass) {
  const Unit& state = units_[unit];
  return state.compute ? static_cast<const void*>(state.compute) : state.full_params;
}

HeldParams ReplicatedParams::held(int unit) const {
  return {0, shards_[unit].numel, units_[unit].full_params};
}

void ReplicatedParams::gather(int unit, float* out) {
  be_.memory->to_host(out, units_[unit].full_params, shards_[unit].numel * sizeof(float));
}

Bf16* ReplicatedParams::optimizer_compute_copy(int unit) {
  // ddp owns (and updates) the whole unit; zero1 and zero2 gather the masters first.
  return gather_after_update_ ? nullptr : units_[unit].compute;
}

void ReplicatedParams::after_update() {
  if (!gather_after_update_) return;  // the optimizer wrote the compute copy
  std::vector<CommHandle> gathers;
  for (size_t u = 0; u < units_.size(); ++u) {
    const UnitShard& s = shards_[u];
    float* full = units_[u].full_params;
    gathers.push_back(topo_.shard->all_gather_async(full + s.begin, full, s.shard, WireType::f32));
  }
  for (CommHandle& gather : gathers) gather.wait();
  after_load();
}

void ReplicatedParams::after_load() {
  for (size_t u = 0; u < units_.size(); ++u) refresh_compute_copy(static_cast<int>(u));
}

// --- sharded parameters ----------------------------------------------------------

void ShardedParams::list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                                 std::vector<Unit>& units, std::vector<GatherSlot>& slots,
                                 StatePlans& plans) {
  const bool bf16 = precision == Precision::bf16;
  units = std::vector<Unit>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size(); ++u) {
    plans.params.add(units[u].owned_params, shards[u].shard);
    if (bf16) plans.params.add(units[u].compute, shards[u].shard);
  }
  const size_t compute_bytes = bf16 ? sizeof(Bf16) : sizeof(float);
  slots = std::vector<GatherSlot>(kGatherSlots);
  for (GatherSlot& slot : slots) {
    plans.buffers.add_bytes(slot.full, max_padded(shards) * compute_bytes);
  }
}

ShardedParams::ShardedParams(const StoreContext& context, Precision precision, StatePlans& plans)
    : layout_(context.layout),
      shards_(context.shards),
      be_(context.backend),
      topo_(context.topology),
      compute_type_(precision == Precision::bf16 ? WireType::bf16 : WireType::f32) {
  list_buffers(context.shards, precision, units_, gather_slots_, plans);
}

void ShardedParams::refresh_compute_copy(int unit) {
  Unit& state = units_[unit];
  if (!state.compute) return;
  const UnitShard& s = shards_[unit];
  be_.cast_f32_to_bf16(state.compute, state.owned_params, s.shard);
}

ShardedParams::GatherSlot* ShardedParams::find_gather_slot(int unit) {
  for (GatherSlot& slot : gather_slots_) {
    if (slot.unit == unit) return &slot;
  }
  return nullptr;
}

ShardedParams::GatherSlot& ShardedParams::start_gather(int unit) {
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
  const Unit& state = units_[unit];
  const void* owned = state.compute ? static_cast<const void*>(state.compute) : state.owned_params;
  victim->pending = topo_.shard->all_gather_async(owned, victim->full, s.shard, compute_type_);
  return *victim;
}

void ShardedParams::prefetch(int unit) {
  if (unit < 0 || unit >= static_cast<int>(units_.size()) || find_gather_slot(unit)) return;
  for (const GatherSlot& slot : gather_slots_) {
    if (slot.refs == 0 && !slot.pending.pending()) {
      start_gather(unit);
      return;
    }
  }
}

const void* ShardedParams::acquire(int unit, Pass pass) {
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

void ShardedParams::release(int unit) {
  GatherSlot* slot = find_gather_slot(unit);
  LLM_CHECK(slot && slot->refs > 0, "sharding engine: unit {} released but not acquired",
            layout_.units[unit].name);
  slot->refs--;
  slot->last_use = ++clock_;
}

HeldParams ShardedParams::held(int unit) const {
  const UnitShard& s = shards_[unit];
  return {s.begin, s.owned, units_[unit].owned_params};
}

void ShardedParams::gather(int unit, float* out) {
  // The fp32 masters, not the compute copy.
  gather_unit_to_host(*topo_.shard, *be_.memory, shards_[unit], units_[unit].owned_params, out,
                      "gathered parameters");
}

void ShardedParams::forget_gathers() {
  for (GatherSlot& slot : gather_slots_) slot.unit = -1;
}

void ShardedParams::after_load() {
  forget_gathers();
  for (size_t u = 0; u < units_.size(); ++u) refresh_compute_copy(static_cast<int>(u));
}

}  // namespace llm
