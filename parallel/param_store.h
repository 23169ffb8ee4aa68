// How a rank holds the fp32 master parameters of every unit and serves the
// model their compute copy (the masters themselves in fp32 precision, a bf16
// copy kept in step with them in bf16 precision: the optimizer writes the
// copy of the elements it updates in the same pass, and it is cast afresh
// after a load). Two stores:
//  - ReplicatedParams (ddp, zero1, zero2): every rank holds the whole unit;
//    after an optimizer step that updated only the owned slices (zero1,
//    zero2) the shard group all-gathers the compute copy (bf16: half the
//    bytes of the masters), so only the owned masters stay current and
//    gather() collects them from the group.
//  - ShardedParams (zero3, hybrid): a rank holds its shard; acquiring a unit
//    all-gathers its compute copy into one of a few pooled buffers, the next
//    unit in pass order is prefetched (at most two gathers beyond the unit in
//    use), and a gathered copy stays cached until its buffer is needed or the
//    parameters change.
// With the optimizer offloaded (offload.optimizer = cpu, ZenFlow) the masters
// live on the host, owned by the host optimizer: the store then holds only
// the compute copy (fp32 or bf16), the optimizer writes the owned elements of
// it (owned_compute) and after_update() makes it whole (zero1 / zero2
// all-gather the compute copy instead of the masters).
// Invariant: every member of the shard group acquires units in the same order,
// so the gathers are issued in the same order everywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/bf16.h"
#include "schema/config.h"
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
  // The masters this rank holds (not with the masters offloaded).
  virtual HeldParams held(int unit) const = 0;
  // The compute copy of the owned elements of `unit` (element `begin` of the
  // owned slice, compute precision, device memory).
  virtual void* owned_compute(int unit) = 0;
  // The full fp32 masters of `unit` (numel elements) into host `out`; a
  // collective over the shard group when parameters are sharded, and in
  // zero1 / zero2 with a bf16 compute copy.
  virtual void gather(int unit, float* out) = 0;
  // Where the optimizer writes the bf16 compute copy of the owned masters of
  // `unit` as it updates them (element `begin` of the owned slice), or null
  // (fp32 precision, or masters offloaded).
  virtual Bf16* optimizer_compute_copy(int unit) = 0;
  // The optimizer has updated the owned slice of every unit's masters (and
  // written optimizer_compute_copy where it is not null), or with the masters
  // offloaded, the owned compute copy.
  virtual void after_update() = 0;
  // Every held master was replaced (initialization, checkpoint load).
  virtual void after_load() = 0;
};

// Where a store's masters live: in it (on the device), or with the host
// optimizer (the store then holds the compute copy only).
enum class Masters { on_device, offloaded };

// The store `plan` calls for; its buffers are listed into `plans` and usable
// once the plans are bound.
std::unique_ptr<ParamStore> make_param_store(const StoreContext& context, const ShardingPlan& plan,
                                             Precision precision, Masters masters,
                                             StatePlans& plans);
// The bytes that store would take, computed without allocating.
StateBytes param_store_bytes(const std::vector<UnitShard>& shards, const ShardingPlan& plan,
                             Precision precision, Masters masters);

class ReplicatedParams final : public ParamStore {
 public:
  struct Unit {
    float* full_params = nullptr;  // (P) masters; null when offloaded
    void* compute = nullptr;       // (P) compute copy; null: full_params is it (fp32 on the device)
  };
  static void list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                           Masters masters, std::vector<Unit>& units, StatePlans& plans);

  ReplicatedParams(const StoreContext& context, Precision precision, Masters masters,
                   bool gather_after_update, StatePlans& plans);
  const void* acquire(int unit, Pass pass) override;
  void release(int) override {}
  HeldParams held(int unit) const override;
  void* owned_compute(int unit) override;
  void gather(int unit, float* out) override;
  Bf16* optimizer_compute_copy(int unit) override;
  void after_update() override;
  void after_load() override;

 private:
  void refresh_compute_copy(int unit);
  void* compute(int unit) const;

  const std::vector<UnitShard>& shards_;
  const Backend& be_;
  Topology& topo_;
  const bool gather_after_update_;  // the optimizer state is sharded (zero1, zero2)
  const WireType compute_type_;
  std::vector<Unit> units_;
};

class ShardedParams final : public ParamStore {
 public:
  struct Unit {
    float* owned_params = nullptr;  // (s) masters; null when offloaded
    void* compute = nullptr;        // (s) compute copy, gathered; null: owned_params is it
  };
  struct GatherSlot {
    void* full = nullptr;  // (P_max) compute-precision parameters
    int unit = -1;         // whose parameters it holds (or is receiving)
    int refs = 0;
    uint64_t last_use = 0;
    CommHandle pending;
  };
  static void list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                           Masters masters, std::vector<Unit>& units,
                           std::vector<GatherSlot>& slots, StatePlans& plans);

  ShardedParams(const StoreContext& context, Precision precision, Masters masters,
                StatePlans& plans);
  const void* acquire(int unit, Pass pass) override;
  void release(int unit) override;
  HeldParams held(int unit) const override;
  void* owned_compute(int unit) override { return compute(unit); }
  void gather(int unit, float* out) override;
  Bf16* optimizer_compute_copy(int unit) override;
  void after_update() override { forget_gathers(); }
  void after_load() override;

 private:
  void refresh_compute_copy(int unit);
  void* compute(int unit) const;
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
