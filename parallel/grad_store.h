// Where the model accumulates each unit's fp32 gradient and how it is reduced
// over the ranks (in parallel.reduce_dtype on the wire). Two stores:
//  - ReplicatedGrads (ddp, zero1): a full local gradient per unit,
//    accumulated over the micro-batches and reduced once, during the last
//    one: ddp all-reduces it in place across replicas, zero1 reduce-scatters
//    it into the owned slice.
//  - ShardedGrads (zero2, zero3, hybrid): the model accumulates into a pooled
//    buffer that is reduce-scattered into the owned slice as soon as the
//    unit's backward releases it, every micro-batch; only the slice is kept
//    (hybrid then all-reduces it across replicas on the last micro-batch).
// A listener (on_final) hears of each unit's gradient once per step, as soon as
// it is final: during the backward where its reduction completes there
// (zero2 / zero3: when its slot is reused; a one-member group: at release),
// else in wait(). The offloaded optimizer starts its copy to the host then.
// Invariant: every member of a group releases units in the same order, so the
// reductions are issued in the same order everywhere.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/bf16.h"
#include "parallel/comm.h"
#include "parallel/unit_shards.h"

namespace llm {

class GradStore {
 public:
  virtual ~GradStore() = default;
  // The full-size (P) fp32 buffer the model accumulates the unit's gradient into.
  virtual float* acquire(int unit) = 0;
  // The model is done with the unit's gradient for this micro-batch.
  virtual void release(int unit, bool last_micro_batch) = 0;
  // Waits for every reduction in flight and finishes it.
  virtual void wait() = 0;
  virtual void zero() = 0;
  // The reduced gradient of the owned elements [begin, begin + owned) of
  // `unit` (ddp owns the whole unit), complete after wait().
  virtual float* reduced(int unit) = 0;
  // Called with a unit when its reduced() gradient of the step is final: its
  // last change is queued on the device (the listener may queue a copy of it).
  void on_final(std::function<void(int unit)> listener) { on_final_ = std::move(listener); }

 protected:
  void announce_final(int unit) {
    if (on_final_) on_final_(unit);
  }

 private:
  std::function<void(int)> on_final_;
};

// The store `plan` calls for; its buffers are listed into `plans` and usable
// once the plans are bound.
std::unique_ptr<GradStore> make_grad_store(const StoreContext& context, const ShardingPlan& plan,
                                           WireType reduce_type, StatePlans& plans);
// The bytes that store would take, computed without allocating.
StateBytes grad_store_bytes(const std::vector<UnitShard>& shards, const ShardingPlan& plan,
                            WireType reduce_type);

class ReplicatedGrads final : public GradStore {
 public:
  struct Unit {
    float* local_grads = nullptr;    // (P) accumulation; ddp all-reduces it in place
    Bf16* reduce_bf16 = nullptr;     // bf16 wire: (P) rounded send buffer (ddp: reduced in place)
    float* reduced_grads = nullptr;  // zero1: (s) the reduce-scatter result
    Bf16* landing_bf16 = nullptr;    // zero1 on the bf16 wire: (s) the result before widening
    CommHandle pending;
  };
  static void list_buffers(const std::vector<UnitShard>& shards, bool scatter, WireType reduce_type,
                           std::vector<Unit>& units, StatePlans& plans);

  // `scatter`: reduce-scatter into the owned slice (zero1), else all-reduce (ddp).
  ReplicatedGrads(const StoreContext& context, bool scatter, WireType reduce_type,
                  StatePlans& plans);
  float* acquire(int unit) override { return units_[unit].local_grads; }
  void release(int unit, bool last_micro_batch) override;
  void wait() override;
  void zero() override;
  float* reduced(int unit) override;

 private:
  // Waits for the unit's reduction, turns a bf16 result back into fp32, and
  // announces the gradient final.
  void finish_reduction(int unit);

  const std::vector<UnitShard>& shards_;
  const Backend& be_;
  Topology& topo_;
  const bool scatter_;
  const WireType reduce_type_;
  std::vector<Unit> units_;
};

class ShardedGrads final : public GradStore {
 public:
  struct GradSlot {
    float* full = nullptr;      // (P_max) where the model accumulates
    Bf16* send_bf16 = nullptr;  // (P_max) full, rounded, when reducing in bf16
    void* landing = nullptr;    // (s_max) the reduce-scatter result, in the reduce type
    int unit = -1;              // in use by the model, or reducing
    bool reducing = false;
    bool last_micro_batch = false;
    uint64_t released_at = 0;  // reductions complete in release order
    CommHandle pending;
  };
  struct Unit {
    float* reduced_grads = nullptr;  // (s) the owned slice, summed over micro-batches
    GradSlot* grad_slot = nullptr;   // the slot the model accumulates into, while it does
    CommHandle pending;              // hybrid: the all-reduce across replicas
    bool replica_reducing = false;   // hybrid: that all-reduce is not yet waited for
  };
  static void list_buffers(const std::vector<UnitShard>& shards, WireType reduce_type,
                           std::vector<Unit>& units, std::vector<GradSlot>& slots,
                           StatePlans& plans);

  ShardedGrads(const StoreContext& context, WireType reduce_type, StatePlans& plans);
  float* acquire(int unit) override;
  void release(int unit, bool last_micro_batch) override;
  void wait() override;
  void zero() override;
  float* reduced(int unit) override { return units_[unit].reduced_grads; }

 private:
  GradSlot& free_grad_slot();
  GradSlot* oldest_reduction();
  // Adds a finished reduce-scatter to the owned slice.
  void complete_reduction(GradSlot& slot);

  const std::vector<UnitShard>& shards_;
  const Backend& be_;
  Topology& topo_;
  const WireType reduce_type_;
  std::vector<Unit> units_;
  std::vector<GradSlot> grad_slots_;
  uint64_t clock_ = 0;
};

}  // namespace llm
