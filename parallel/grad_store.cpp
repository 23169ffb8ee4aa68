// The gradient stores (see grad_store.h for the contract).
#include "parallel/grad_store.h"

#include "base/error.h"

namespace llm {
namespace {

constexpr int kGradSlots = 2;  // the unit in backward + the one still reducing

}  // namespace

std::unique_ptr<GradStore> make_grad_store(const StoreContext& context, const ShardingPlan& plan,
                                           WireType reduce_type, StatePlans& plans) {
  if (plan.shard_grads) return std::make_unique<ShardedGrads>(context, reduce_type, plans);
  return std::make_unique<ReplicatedGrads>(context, plan.shard_optimizer, reduce_type, plans);
}

StateBytes grad_store_bytes(const std::vector<UnitShard>& shards, const ShardingPlan& plan,
                            WireType reduce_type) {
  StatePlans plans;
  if (plan.shard_grads) {
    std::vector<ShardedGrads::Unit> units;
    std::vector<ShardedGrads::GradSlot> slots;
    ShardedGrads::list_buffers(shards, reduce_type, units, slots, plans);
    return plans.bytes();
  }
  std::vector<ReplicatedGrads::Unit> units;
  ReplicatedGrads::list_buffers(shards, plan.shard_optimizer, reduce_type, units, plans);
  return plans.bytes();
}

// --- replicated gradients --------------------------------------------------------

void ReplicatedGrads::list_buffers(const std::vector<UnitShard>& shards, bool scatter,
                                   WireType reduce_type, std::vector<Unit>& units,
                                   StatePlans& plans) {
  const bool reduce_bf16 = reduce_type == WireType::bf16;
  units = std::vector<Unit>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size(); ++u) {
    const UnitShard& s = shards[u];
    Unit& state = units[u];
    plans.grads.add(state.local_grads, s.padded);
    if (scatter) plans.grads.add(state.reduced_grads, s.shard);
    if (reduce_bf16) {
      plans.buffers.add(state.reduce_bf16, s.padded);
      if (scatter) plans.buffers.add(state.landing_bf16, s.shard);
    }
  }
}

ReplicatedGrads::ReplicatedGrads(const StoreContext& context, bool scatter, WireType reduce_type,
                                 StatePlans& plans)
    : shards_(context.shards),
      be_(context.backend),
      topo_(context.topology),
      scatter_(scatter),
      reduce_type_(reduce_type) {
  list_buffers(context.shards, scatter, reduce_type, units_, plans);
}

void ReplicatedGrads::release(int unit, bool last_micro_batch) {
  if (!last_micro_batch) return;  // keep accumulating locally
  Unit& state = units_[unit];
  const UnitShard& s = shards_[unit];
  const void* send = state.local_grads;
  if (state.reduce_bf16) {
    be_.cast_f32_to_bf16(state.reduce_bf16, state.local_grads, s.padded);
    send = state.reduce_bf16;
  }
  if (scatter_) {  // zero1
    void* recv = state.landing_bf16 ? static_cast<void*>(state.landing_bf16) : state.reduced_grads;
    state.pending = topo_.shard->reduce_scatter_async(send, recv, s.shard, reduce_type_);
  } else {  // ddp
    state.pending =
        topo_.replicate->all_reduce_async(const_cast<void*>(send), s.padded, reduce_type_);
  }
  // Over one member the reduction is a copy: the gradient is final now.
  if ((scatter_ ? topo_.shard : topo_.replicate)->size() == 1) finish_reduction(unit);
}

void ReplicatedGrads::finish_reduction(int unit) {
  Unit& state = units_[unit];
  state.pending.wait();
  const UnitShard& s = shards_[unit];
  if (state.landing_bf16) {
    be_.cast_bf16_to_f32(state.reduced_grads, state.landing_bf16, s.shard);
  } else if (state.reduce_bf16) {
    be_.cast_bf16_to_f32(state.local_grads, state.reduce_bf16, s.padded);
  }
  announce_final(unit);
}

void ReplicatedGrads::wait() {
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u].pending.pending()) finish_reduction(static_cast<int>(u));
  }
}

void ReplicatedGrads::zero() {
  for (size_t u = 0; u < units_.size(); ++u) {
    be_.f32.fill_zero(units_[u].local_grads, shards_[u].padded);
    if (scatter_) be_.f32.fill_zero(units_[u].reduced_grads, shards_[u].shard);
  }
}

float* ReplicatedGrads::reduced(int unit) {
  return scatter_ ? units_[unit].reduced_grads : units_[unit].local_grads;
}

// --- sharded gradients -----------------------------------------------------------

void ShardedGrads::list_buffers(const std::vector<UnitShard>& shards, WireType reduce_type,
                                std::vector<Unit>& units, std::vector<GradSlot>& slots,
                                StatePlans& plans) {
  units = std::vector<Unit>(shards.size());  // sized before slots are listed
  for (size_t u = 0; u < shards.size(); ++u) {
    plans.grads.add(units[u].reduced_grads, shards[u].shard);
  }
  slots = std::vector<GradSlot>(kGradSlots);
  for (GradSlot& slot : slots) {
    plans.buffers.add(slot.full, max_padded(shards));
    if (reduce_type == WireType::bf16) plans.buffers.add(slot.send_bf16, max_padded(shards));
    plans.buffers.add_bytes(slot.landing, max_shard(shards) * wire_bytes(reduce_type));
  }
}

ShardedGrads::ShardedGrads(const StoreContext& context, WireType reduce_type, StatePlans& plans)
    : shards_(context.shards),
      be_(context.backend),
      topo_(context.topology),
      reduce_type_(reduce_type) {
  list_buffers(context.shards, reduce_type, units_, grad_slots_, plans);
}

ShardedGrads::GradSlot* ShardedGrads::oldest_reduction() {
  GradSlot* oldest = nullptr;
  for (GradSlot& slot : grad_slots_) {
    if (slot.reducing && (!oldest || slot.released_at < oldest->released_at)) oldest = &slot;
  }
  return oldest;
}

ShardedGrads::GradSlot& ShardedGrads::free_grad_slot() {
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

float* ShardedGrads::acquire(int unit) {
  Unit& state = units_[unit];
  if (!state.grad_slot) {
    GradSlot& slot = free_grad_slot();
    slot.unit = unit;
    be_.f32.fill_zero(slot.full, shards_[unit].padded);
    state.grad_slot = &slot;
  }
  return state.grad_slot->full;
}

void ShardedGrads::release(int unit, bool last_micro_batch) {
  Unit& state = units_[unit];
  const UnitShard& s = shards_[unit];
  GradSlot& slot = *state.grad_slot;
  state.grad_slot = nullptr;
  slot.reducing = true;
  slot.last_micro_batch = last_micro_batch;
  slot.released_at = ++clock_;
  const void* send = slot.full;
  if (slot.send_bf16) {
    be_.cast_f32_to_bf16(slot.send_bf16, slot.full, s.padded);
    send = slot.send_bf16;
  }
  slot.pending = topo_.shard->reduce_scatter_async(send, slot.landing, s.shard, reduce_type_);
}

void ShardedGrads::complete_reduction(GradSlot& slot) {
  slot.pending.wait();
  const int unit = slot.unit;
  Unit& state = units_[unit];
  const size_t n = shards_[unit].shard;
  // Add the micro-batch's reduced shard through the backend (so this works on
  // any device); a bf16 result is widened first into the slot's fp32 buffer,
  // which the finished reduce-scatter no longer needs.
  const float* landing = static_cast<const float*>(slot.landing);
  if (reduce_type_ == WireType::bf16) {
    be_.cast_bf16_to_f32(slot.full, static_cast<const Bf16*>(slot.landing), n);
    landing = slot.full;
  }
  be_.f32.add_vectors(state.reduced_grads, state.reduced_grads, landing, n);
  slot.unit = -1;
  slot.reducing = false;
  if (!slot.last_micro_batch) return;
  if (topo_.replicate->size() > 1) {
    state.pending = topo_.replicate->all_reduce_async(state.reduced_grads, n, WireType::f32);
    state.replica_reducing = true;
  } else {
    announce_final(unit);
  }
}

void ShardedGrads::wait() {
  while (GradSlot* slot = oldest_reduction()) complete_reduction(*slot);
  for (size_t u = 0; u < units_.size(); ++u) {
    Unit& state = units_[u];
    if (!state.replica_reducing) continue;
    state.pending.wait();
    state.replica_reducing = false;
    announce_final(static_cast<int>(u));
  }
}

void ShardedGrads::zero() {
  for (size_t u = 0; u < units_.size(); ++u) {
    be_.f32.fill_zero(units_[u].reduced_grads, shards_[u].shard);
  }
}

}  // namespace llm
