// The parameter stores (see param_store.h for the contract).
#include "parallel/param_store.h"

#include <algorithm>

#include "base/error.h"

namespace llm {
namespace {

constexpr int kGatherSlots =
    3;  // the unit in use + a prefetch, or head + tied embedding + a prefetch

WireType compute_type_of(Precision precision) {
  return stores_bf16(precision) ? WireType::bf16 : WireType::f32;
}

// Lists a unit's masters (on the device) and its compute copy (unless the
// masters, fp32 on the device, are it), `count` elements each.
template <class Unit>
void list_unit(Unit& unit, float*& masters, size_t count, Precision precision, Masters where,
               StatePlans& plans) {
  if (where == Masters::on_device) plans.params.add(masters, count);
  if (stores_bf16(precision) || where == Masters::offloaded) {
    plans.params.add_bytes(unit.compute, count * wire_bytes(compute_type_of(precision)));
  }
}

}  // namespace

std::unique_ptr<ParamStore> make_param_store(const StoreContext& context, const ShardingPlan& plan,
                                             Precision precision, Masters masters,
                                             StatePlans& plans) {
  if (plan.shard_params) return std::make_unique<ShardedParams>(context, precision, masters, plans);
  return std::make_unique<ReplicatedParams>(context, precision, masters, plan.shard_optimizer,
                                            plans);
}

StateBytes param_store_bytes(const std::vector<UnitShard>& shards, const ShardingPlan& plan,
                             Precision precision, Masters masters) {
  StatePlans plans;
  if (plan.shard_params) {
    std::vector<ShardedParams::Unit> units;
    std::vector<ShardedParams::GatherSlot> slots;
    ShardedParams::list_buffers(shards, precision, masters, units, slots, plans);
    return plans.bytes();
  }
  std::vector<ReplicatedParams::Unit> units;
  ReplicatedParams::list_buffers(shards, precision, masters, units, plans);
  return plans.bytes();
}

// --- replicated parameters -------------------------------------------------------

void ReplicatedParams::list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                                    Masters masters, std::vector<Unit>& units, StatePlans& plans) {
  units = std::vector<Unit>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size(); ++u) {
    list_unit(units[u], units[u].full_params, shards[u].padded, precision, masters, plans);
  }
}

ReplicatedParams::ReplicatedParams(const StoreContext& context, Precision precision,
                                   Masters masters, bool gather_after_update, StatePlans& plans)
    : shards_(context.shards),
      be_(context.backend),
      topo_(context.topology),
      gather_after_update_(gather_after_update),
      compute_type_(compute_type_of(precision)) {
  list_buffers(context.shards, precision, masters, units_, plans);
}

void* ReplicatedParams::compute(int unit) const {
  const Unit& state = units_[unit];
  return state.compute ? state.compute : state.full_params;
}

void ReplicatedParams::refresh_compute_copy(int unit) {
  Unit& state = units_[unit];
  if (!state.compute) return;
  const UnitShard& s = shards_[unit];
  be_.cast_f32_to_bf16(static_cast<Bf16*>(state.compute), state.full_params, s.padded);
}

const void* ReplicatedParams::acquire(int unit, Pass) { return compute(unit); }

HeldParams ReplicatedParams::held(int unit) const {
  LLM_CHECK(units_[unit].full_params, "parameter store: the masters are offloaded");
  return {0, shards_[unit].numel, units_[unit].full_params};
}

void* ReplicatedParams::owned_compute(int unit) {
  return static_cast<char*>(compute(unit)) + shards_[unit].begin * wire_bytes(compute_type_);
}

void ReplicatedParams::gather(int unit, float* out) {
  const UnitShard& s = shards_[unit];
  if (gather_after_update_ && units_[unit].compute) {
    // zero1 / zero2 with a separate compute copy gather that copy after an
    // update: only the owned masters are current.
    gather_unit_to_host(*topo_.shard, *be_.memory, s, held(unit).data + s.begin, out,
                        "gathered parameters");
    return;
  }
  be_.memory->to_host(out, held(unit).data, s.numel * sizeof(float));
}

Bf16* ReplicatedParams::optimizer_compute_copy(int unit) {
  // The bf16 copy of the owned slice (ddp owns the whole unit); zero1 and
  // zero2 then gather it.
  Unit& state = units_[unit];
  if (!state.compute || !state.full_params) return nullptr;
  return static_cast<Bf16*>(state.compute) + shards_[unit].begin;
}

void ReplicatedParams::after_update() {
  if (!gather_after_update_) return;  // the optimizer wrote the compute copy
  // The owned slices of the compute copy (bf16, or fp32 with the masters
  // offloaded: the optimizer wrote them), else of the fp32 masters, which
  // are the compute copy.
  std::vector<CommHandle> gathers;
  for (size_t u = 0; u < units_.size(); ++u) {
    const UnitShard& s = shards_[u];
    if (s.numel == 0) continue;  // another pipeline stage's unit: no call for nothing
    const WireType type = units_[u].compute ? compute_type_ : WireType::f32;
    char* full = static_cast<char*>(compute(static_cast<int>(u)));
    gathers.push_back(
        topo_.shard->all_gather_async(full + s.begin * wire_bytes(type), full, s.shard, type));
  }
  for (CommHandle& gather : gathers) gather.wait();
}

void ReplicatedParams::after_load() {
  for (size_t u = 0; u < units_.size(); ++u) refresh_compute_copy(static_cast<int>(u));
}

// --- sharded parameters ----------------------------------------------------------

void ShardedParams::list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                                 Masters masters, std::vector<Unit>& units,
                                 std::vector<GatherSlot>& slots, StatePlans& plans) {
  units = std::vector<Unit>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size(); ++u) {
    list_unit(units[u], units[u].owned_params, shards[u].shard, precision, masters, plans);
  }
  const size_t compute_bytes = wire_bytes(compute_type_of(precision));
  slots = std::vector<GatherSlot>(kGatherSlots);
  for (GatherSlot& slot : slots) {
    plans.buffers.add_bytes(slot.full, max_padded(shards) * compute_bytes);
  }
}

ShardedParams::ShardedParams(const StoreContext& context, Precision precision, Masters masters,
                             StatePlans& plans)
    : layout_(context.layout),
      shards_(context.shards),
      be_(context.backend),
      topo_(context.topology),
      compute_type_(compute_type_of(precision)) {
  list_buffers(context.shards, precision, masters, units_, gather_slots_, plans);
}

void* ShardedParams::compute(int unit) const {
  const Unit& state = units_[unit];
  return state.compute ? state.compute : state.owned_params;
}

void ShardedParams::refresh_compute_copy(int unit) {
  Unit& state = units_[unit];
  if (!state.compute || !state.owned_params) return;
  const UnitShard& s = shards_[unit];
  be_.cast_f32_to_bf16(static_cast<Bf16*>(state.compute), state.owned_params, s.shard);
}

Bf16* ShardedParams::optimizer_compute_copy(int unit) {
  const Unit& state = units_[unit];
  return state.compute && state.owned_params ? static_cast<Bf16*>(state.compute) : nullptr;
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
  victim->pending =
      topo_.shard->all_gather_async(compute(unit), victim->full, s.shard, compute_type_);
  return *victim;
}

void ShardedParams::prefetch(int unit) {
  // Not past the model, nor into another pipeline stage's (empty) units.
  if (unit < 0 || unit >= static_cast<int>(units_.size()) || shards_[unit].numel == 0 ||
      find_gather_slot(unit)) {
    return;
  }
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
    if (pass == Pass::backward && next == layout_.embed_unit())
      next = -1;  // backward needs no embedding params
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
  LLM_CHECK(units_[unit].owned_params, "parameter store: the masters are offloaded");
  const UnitShard& s = shards_[unit];
  return {s.begin, s.owned, units_[unit].owned_params};
}

void ShardedParams::gather(int unit, float* out) {
  // The fp32 masters, not the compute copy.
  gather_unit_to_host(*topo_.shard, *be_.memory, shards_[unit], held(unit).data, out,
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
