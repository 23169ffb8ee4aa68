// The sharding engine: owns the model state (fp32 parameters, gradients, AdamW
// moments; per unit) sharded as the mode's ShardingPlan says, and serves it to
// the model through UnitProvider, communicating at unit boundaries.
//  - Each unit of n elements is padded to P = s * S (S the shard group size,
//    s = ceil(n / S)); shard-group member i owns elements [i*s, i*s + s) ∩ [0, n).
//  - Sharded parameters (zero3, hybrid): a unit is all-gathered into one of a
//    few pooled buffers when the model acquires it, the next unit in pass
//    order is prefetched (at most two gathers beyond the unit in use), and a
//    gathered copy stays cached until its buffer is needed or parameters change.
//  - Gradients: unsharded modes accumulate full local gradients and reduce them
//    once, during the last micro-batch (ddp all-reduce, zero1 reduce-scatter);
//    sharded modes reduce-scatter each unit as soon as its backward releases
//    it, every micro-batch, from a pooled scratch buffer into the owned shard
//    (hybrid then all-reduces the shard across replicas on the last one).
//  - The optimizer updates only owned slices; zero1/zero2 then all-gather the
//    parameters.
//  - bf16 precision: the fp32 parameters above are the master weights; the
//    model computes with a bf16 copy (full, or the owned shard that zero3 /
//    hybrid all-gather in bf16, half the bytes), refreshed after every update.
//    Gradients accumulate in fp32 and are reduced in parallel.reduce_dtype.
// Invariant: every member of a group issues the same collectives in the same
// order, because they all follow the model's deterministic unit order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/arena.h"
#include "runtime/bf16.h"
#include "config/config.h"
#include "model/backend.h"
#include "model/layout.h"
#include "model/optimizer.h"
#include "model/unit_provider.h"
#include "parallel/comm.h"
#include "parallel/topology.h"

namespace llm {

// Bytes held by one rank. `buffers` are the pooled gather / gradient scratch
// buffers of the sharded modes.
struct StateBytes {
  size_t params = 0, grads = 0, optimizer = 0, buffers = 0;
  size_t state() const { return params + grads + optimizer; }
  size_t total() const { return state() + buffers; }
};

// The slice of model state a rank is responsible for saving: elements
// [begin, begin + count) of a unit's fp32 parameters and AdamW moments, in
// the engine backend's device memory.
struct OwnedSlice {
  int unit;
  size_t begin, count;
  const float* params;
  const float* m;
  const float* v;
};

// Where loaded state comes from: fills any element range of a unit's
// parameters and moments (host buffers; the engine copies them to its
// device); a null output is not wanted.
class StateSource {
 public:
  virtual ~StateSource() = default;
  virtual void read(int unit, size_t begin, size_t count, float* params, float* m, float* v) = 0;
};

class ShardingEngine : public UnitProvider {
 public:
  ShardingEngine(const ParameterLayout& layout, const Config& config, const Backend& backend,
                 Topology& topology);

  // Bytes a member of a shard group of the plan's size holds, computed
  // without allocating (the largest over shard ranks).
  static StateBytes planned_bytes(const ParameterLayout& layout, const ShardingPlan& plan,
                                  Precision precision, WireType reduce_type);
  StateBytes bytes() const { return bytes_; }
  // The backend whose device holds the state (owned_slices point into its memory).
  const Backend& backend() const { return be_; }
  const ParameterLayout& layout() const { return layout_; }

  const void* acquire_params(int unit, Pass pass) override;
  void release_params(int unit, Pass pass) override;
  float* acquire_grads(int unit) override;
  void release_grads(int unit) override;

  // Gradients of the coming micro-batch are reduced during it when it is the
  // last of the step (and always when gradients are sharded).
  void begin_micro_batch(bool last) { last_micro_batch_ = last; }
  void zero_grads();
  // Global L2 norm of the reduced gradient (waits for pending reductions).
  float grad_norm();
  void optimizer_step(const AdamWStep& step);

  // The full parameters of `unit` (numel elements) into out; a collective
  // over the shard group when parameters are sharded.
  void gather_params(int unit, float* out);
  // The reduced gradient of `unit` (numel elements) into out; a collective
  // over the shard group when gradients are sharded.
  void gather_grads(int unit, float* out);
  // Every unit's parameters, concatenated in unit order (total_numel).
  std::vector<float> gather_all_params();

  // The state this rank owns, unit by unit (units it owns nothing of are
  // left out). A checkpoint is the union of one replica's owned slices.
  std::vector<OwnedSlice> owned_slices() const;
  // Replaces parameters (and moments, when `with_moments`) by what `source`
  // says, each rank reading just the ranges it holds.
  void load_state(StateSource& source, bool with_moments);

 private:
  struct UnitShard {
    size_t numel;   // n
    size_t shard;   // s
    size_t padded;  // P = s * S
    size_t begin;   // first owned element
    size_t owned;   // owned elements (may be 0 on trailing ranks)
  };
  struct GatherSlot {
    void* full = nullptr;   // (P_max) compute-precision parameters
    int unit = -1;          // whose parameters it holds (or is receiving)
    int refs = 0;
    uint64_t last_use = 0;
    CommHandle pending;
  };
  struct GradSlot {
    float* full = nullptr;     // (P_max) where the model accumulates
    Bf16* send_bf16 = nullptr;  // (P_max) full, rounded, when reducing in bf16
    void* landing = nullptr;   // (s_max) the reduce-scatter result, in the reduce type
    int unit = -1;             // in use by the model, or reducing
    bool reducing = false;
    bool last_micro_batch = false;
    uint64_t released_at = 0;  // reductions complete in release order
    CommHandle pending;
  };
  struct UnitState {
    float* full_params = nullptr;    // (P) unsharded parameters
    float* owned_params = nullptr;   // (s) sharded parameters
    float* local_grads = nullptr;    // (P) unsharded-gradient accumulation
    float* reduced_grads = nullptr;  // (s) reduced gradient of the owned slice
    float* m = nullptr;              // (s)
    float* v = nullptr;              // (s)
    Bf16* compute = nullptr;         // bf16: (P) or, sharded, (s) copy of the parameters
    Bf16* reduce_bf16 = nullptr;     // bf16 reduce of unsharded gradients: (P) send buffer
    Bf16* landing_bf16 = nullptr;    // ... and (s) zero1 reduce-scatter result
    GradSlot* grad_slot = nullptr;   // sharded gradients: the slot in use
    CommHandle pending;              // unsharded / replica gradient reduction
  };

  static std::vector<UnitShard> unit_shards(const ParameterLayout& layout, int group_size,
                                            int group_rank);
  static void plan_buffers(const std::vector<UnitShard>& shards, const ShardingPlan& plan,
                           Precision precision, WireType reduce_type,
                           std::vector<UnitState>* units, std::vector<GatherSlot>* gather,
                           std::vector<GradSlot>* grad, BufferPlan out[4]);
  // Rounds the fp32 master parameters of `unit` into its bf16 compute copy.
  void refresh_compute_copy(int unit);
  // Turns a finished bf16 reduction of unsharded gradients back into fp32.
  void unpack_bf16_reduction(int unit);

  GatherSlot* find_gather_slot(int unit);
  GatherSlot& start_gather(int unit);
  void prefetch(int unit);
  GradSlot& free_grad_slot();
  GradSlot* oldest_reduction();
  void complete_reduction(GradSlot& slot);
  void wait_gradients();

  const ParameterLayout& layout_;
  const TrainingConfig& training_;
  const Backend& be_;
  Topology& topo_;
  const ShardingPlan& plan_;
  const Precision precision_;
  const WireType reduce_type_;
  const WireType compute_type_;
  std::vector<UnitShard> shards_;
  std::vector<UnitState> units_;
  std::vector<GatherSlot> gather_slots_;
  std::vector<GradSlot> grad_slots_;
  Arena arenas_[4];  // parameters, gradients, optimizer, buffers
  StateBytes bytes_;
  bool last_micro_batch_ = true;
  uint64_t clock_ = 0;
};

}  // namespace llm
