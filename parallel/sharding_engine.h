// The sharding engine: owns the model state (fp32 parameters, gradients, AdamW
// moments; per unit) sharded as the mode's ShardingPlan says, and serves it to
// the model through UnitProvider, communicating at unit boundaries.
//  - Units are cut into shards as unit_shards.h says; a rank's AdamW moments
//    cover the elements it owns.
//  - Parameters live in a ParamStore (param_store.h): replicated (ddp, zero1,
//    zero2) or sharded and gathered into a pool when used (zero3, hybrid).
//  - Gradients live in a GradStore (grad_store.h): replicated and reduced once
//    per step (ddp, zero1), or reduce-scattered per unit as the backward
//    releases it (zero2, zero3, hybrid).
//  - The optimizer updates only owned slices; the parameter store then makes
//    them whole again (zero1/zero2 all-gather the parameters).
//  - The gradient norm queues one squared-norm per unit into a device array
//    and reads it back once: one wait for the device per step, not one per unit.
//  - bf16 precision: the fp32 parameters above are the master weights; the
//    model computes with a bf16 copy (full, or the owned shard that zero3 /
//    hybrid all-gather in bf16, half the bytes), written by the optimizer as
//    it updates the masters (zero1 / zero2 then all-gather that copy).
//    Gradients accumulate in fp32 and are reduced in parallel.reduce_dtype.
//  - Offload (offload.optimizer = cpu, ZenFlow) is one more property of the
//    mode: the masters and moments of the owned elements live with a host
//    optimizer (host_optimizer.h; ZenFlow: zenflow.h) instead of the device,
//    the parameter store keeps only the compute copy; each reduced gradient
//    shard goes to the host as soon as it is final (during the backward
//    where the reduction completes there), and the optimizer step takes the
//    compute copy back. Deferred host work (delayed_update, overlap_step) is applied
//    by settle(), which a checkpoint save calls.
// Invariant: every member of a group issues the same collectives in the same
// order, because they all follow the model's deterministic unit order.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "device/arena.h"
#include "schema/config.h"
#include "model/backend.h"
#include "model/layout.h"
#include "model/optimizer.h"
#include "model/unit_provider.h"
#include "parallel/grad_store.h"
#include "parallel/host_optimizer.h"
#include "parallel/param_store.h"
#include "parallel/topology.h"
#include "parallel/unit_shards.h"
#include "parallel/zenflow.h"

namespace llm {

// The slice of model state a rank is responsible for saving: elements
// [begin, begin + count) of a unit's fp32 parameters and AdamW moments, in
// `memory` (the device's, or the host's when the optimizer is offloaded).
struct OwnedSlice {
  int unit;
  size_t begin, count;
  const float* params;
  const float* m;
  const float* v;
  const DeviceMemory* memory;
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
  // without allocating (the largest over shard ranks), for config's
  // precision, reduce_dtype and offload.
  static StateBytes planned_bytes(const ParameterLayout& layout, const ShardingPlan& plan,
                                  const Config& config);
  StateBytes bytes() const { return bytes_; }
  const Backend& backend() const { return be_; }
  const ParameterLayout& layout() const { return layout_; }

  const void* acquire_params(int unit, Pass pass) override;
  void release_params(int unit, Pass pass) override;
  float* acquire_grads(int unit) override;
  void release_grads(int unit) override;
  // Moves on at every optimizer step, settle() and state load.
  uint64_t params_version() const override { return params_version_; }

  // Gradients of the coming micro-batch are reduced during it when it is the
  // last of the step (and always when gradients are sharded).
  void begin_micro_batch(bool last) { last_micro_batch_ = last; }
  void zero_grads();
  // Hears each unit's reduced gradient become final, once per step, as the
  // gradient store announces it (the step trace records when; an offloaded
  // optimizer starts the unit's copy to the host then, before the observer).
  void on_gradient_final(std::function<void(int unit)> observer) {
    final_observer_ = std::move(observer);
  }
  // Global L2 norm of the reduced gradient (waits for pending reductions).
  float grad_norm();
  void optimizer_step(const AdamWStep& step);
  // Applies deferred optimizer work (a delayed offloaded update, ZenFlow's
  // queued or partial host update) on every rank: a save point. A no-op
  // without offload.
  void settle();
  // The host optimizer's traffic and time so far (zeros without offload),
  // and ZenFlow's counters (null without it).
  OffloadStats offload_stats() const;
  const ZenFlowStats* zenflow_stats() const { return zenflow_ ? &zenflow_->stats() : nullptr; }
  // Steps of one pass over the training data (ZenFlow's epoch selection).
  void set_steps_per_epoch(int steps) {
    if (zenflow_) zenflow_->set_steps_per_epoch(steps);
  }

  // The full parameters of `unit` (numel elements) into out; a collective
  // over the shard group (call it on every member).
  void gather_params(int unit, float* out);
  // The reduced gradient of `unit` (numel elements) into out; a collective
  // over the shard group when gradients are sharded.
  void gather_grads(int unit, float* out);
  // The whole model's parameters (every stage's tensor-parallel slices put in place),
  // concatenated in unit order (layout_build(config).total_numel); a
  // collective over the world.
  std::vector<float> gather_all_params();

  // The state this rank owns, unit by unit (units it owns nothing of are
  // left out), after settle(). A checkpoint is the union of one replica's
  // owned slices.
  std::vector<OwnedSlice> owned_slices() const;
  // Replaces parameters (and moments, when `with_moments`) by what `source`
  // says (in the whole model's units and offsets), each rank reading just the
  // ranges it holds.
  void load_state(StateSource& source, bool with_moments);
  // The elements load_state asks `source` for on this rank (params, m and v
  // counted apart): the size of a load, known before it starts.
  size_t load_elements(bool with_moments) const;

 private:
  struct Moments {
    float* m = nullptr;  // (s)
    float* v = nullptr;  // (s)
  };
  // A range of a unit's owned elements that counts toward the gradient norm
  // on this rank: the owned slice, less the replicated tensors on every
  // tensor-parallel rank but the first (they count once).
  struct NormRange {
    int unit;
    size_t begin, count;
  };
  static std::vector<NormRange> norm_ranges(const ParameterLayout& layout,
                                            const std::vector<UnitShard>& shards);
  // The engine's own state: the moments (optimizer), and per norm range the
  // squared norm of its reduced gradient (grads; written on the device by
  // grad_norm).
  static void list_buffers(const std::vector<UnitShard>& shards, size_t norm_range_count,
                           bool offloaded, std::vector<Moments>& moments, double*& square_sums,
                           StatePlans& plans);
  // The fp32 masters of the elements this rank owns of `unit` (device memory).
  float* owned_params(int unit) const;
  // Writes initial or loaded masters: `fill(unit, begin, count, params, m, v)`
  // fills host buffers for each range this rank holds (m, v null: not wanted).
  template <class Fill>
  void write_state(Fill&& fill, bool with_moments);

  const ParameterLayout& layout_;
  const TrainingConfig& training_;
  const Backend& be_;
  Topology& topo_;
  const ShardingPlan& plan_;
  const std::vector<UnitShard> shards_;
  Arena arenas_[4];  // parameters, gradients, optimizer, buffers (outlive the stores)
  std::vector<Moments> moments_;
  const std::vector<NormRange> norm_ranges_;
  double* square_sums_ = nullptr;         // (norm ranges) in the backend's memory
  std::vector<double> host_square_sums_;  // (norm ranges) read back by grad_norm
  std::unique_ptr<ParamStore> params_;
  std::unique_ptr<GradStore> grads_;
  std::unique_ptr<HostOptimizer> host_;  // offloaded optimizer, else null
  std::unique_ptr<ZenFlow> zenflow_;     // ZenFlow, else null
  StateBytes bytes_;
  bool last_micro_batch_ = true;
  uint64_t params_version_ = 0;
  std::function<void(int)> final_observer_;
};

}  // namespace llm
