// How a rank holds the fp32 master parameters of every unit and serves the
// model their compute copy (the masters themselves in fp32 precision, a bf16
// copy kept in step with them in bf16 precision: the optimizer writes it in
// the pass that updates the masters, where the rank holds the copy of exactly
// what it updates; otherwise it is cast after the change). Two stores:
//  - ReplicatedParams (ddp, zero1, zero2): every rank holds the whole unit;
//    after an optimizer step that updated only the owned slices (zero1,
//    zero2) the shard group all-gathers them.
//  - ShardedParams (zero3, hybrid): a rank holds its shard; acquiring a unit
//    all-gathers its compute copy into one of a few pooled buffers, the next
//    unit in pass order is prefetched (at most two gathers beyond the unit in
//    use), and a gathered copy stays cached until its buffer is needed or the
//    parameters change.
// Invariant: every member of the shard group acquires units in the same order,
// so the gathers are issued in the same order everywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/bf16.h"
#include "config/config.h"
#include "model/unit_provider.h"
#include "parallel/comm.h"
#include "parallel/unit_shards.h"

namespace llm {

// The fp32 masters a rank holds of one unit: elements [begin, begin + count).
struct HeldParams {
  size_t begin, count;
  float* data;
};

class ParamStore {
 public:
  virtual ~ParamStore() = default;
  // The unit's compute parameters, valid until the matching release.
  virtual const void* acquire(int unit, Pass pass) = 0;
  virtual void release(int unit) = 0;
  virtual HeldParams held(int unit) const = 0;
  // The full fp32 masters of `unit` (numel elements) into host `out`; a
  // collective over the shard group when parameters are sharded.
  virtual void gather(int unit, float* out) = 0;
  // Where the optimizer writes the bf16 compute copy of the owned masters of
  // `unit` as it updates them (element `begin` of the owned slice), or null:
  // fp32 precision, or a store that casts the copy itself after gathering the
  // updated masters (zero1, zero2).
  virtual Bf16* optimizer_compute_copy(int unit) = 0;
  // The optimizer has updated the owned slice of every unit's masters (and
  // written optimizer_compute_copy where it is not null).
  virtual void after_update() = 0;
  // Every held master was replaced (initialization, checkpoint load).
  virtual void after_load() = 0;
};

// The store `plan` calls for; its buffers are listed into `plans` and usable
// once the plans are bound.
std::unique_ptr<ParamStore> make_param_store(const StoreContext& context, const ShardingPlan& plan,
                                             Precision precision, StatePlans& plans);
// The bytes that store would take, computed without allocating.
StateBytes param_store_bytes(const std::vector<UnitShard>& shards, const ShardingPlan& plan,
                             Precision precision);

class ReplicatedParams final : public ParamStore {
 public:
  struct Unit {
    float* full_params = nullptr;  // (P)
    Bf16* compute = nullptr;       // bf16 precision: (P) copy of full_params
  };
  static void list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                           std::vector<Unit>& units, StatePlans& plans);

  ReplicatedParams(const StoreContext& context, Precision precision, bool gather_after_update,
                   StatePlans& plans);
  const void* acquire(int unit, Pass pass) override;
  void release(int) override {}
  HeldParams held(int unit) const override;
  void gather(int unit, float* out) override;
  Bf16* optimizer_compute_copy(int unit) override;
  void after_update() override;
  void after_load() override;

 private:
  void refresh_compute_copy(int unit);

  const std::vector<UnitShard>& shards_;
  const Backend& be_;
  Topology& topo_;
  const bool gather_after_update_;  // the optimizer state is sharded (zero1, zero2)
  std::vector<Unit> units_;
};

class ShardedParams final : public ParamStore {
 public:
  struct Unit {
    float* owned_params = nullptr;  // (s)
    Bf16* compute = nullptr;        // bf16 precision: (s) copy of owned_params, gathered in bf16
  };
  struct GatherSlot {
    void* full = nullptr;  // (P_max) compute-precision parameters
    int unit = -1;         // whose parameters it holds (or is receiving)
    int refs = 0;
    uint64_t last_use = 0;
    CommHandle pending;
  };
  static void list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                           std::vector<Unit>& units, std::vector<GatherSlot>& slots,
                           StatePlans& plans);

  ShardedParams(const StoreContext& context, Precision precision, StatePlans& plans);
  const void* acquire(int unit, Pass pass) override;
  void release(int unit) override;
  HeldParams held(int unit) const override;
  void gather(int unit, float* out) override;
  Bf16* optimizer_compute_copy(int unit) override { return units_[unit].compute; }
  void after_update() override { forget_gathers(); }
  void after_load() override;

 private:
  void refresh_compute_copy(int unit);
  // Cached gathers are stale once the parameters change.
  void forget_gathers();
  GatherSlot* find_gather_slot(int unit);
  GatherSlot& start_gather(int unit);
  void prefetch(int unit);

  const ParameterLayout& layout_;
  const std::vector<UnitShard>& shards_;
  const Backend& be_;
  Topology& topo_;
  const WireType compute_type_;
  std::vector<Unit> units_;
  std::vector<GatherSlot> gather_slots_;
  uint64_t clock_ = 0;
};

}  // namespace llm
