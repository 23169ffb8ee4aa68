// ZeRO-Offload's host executor: this rank's owned slice of every unit's fp32
// master weights and AdamW moments, in host memory (page-locked on a GPU),
// updated by AdamW on a worker thread while the caller's thread drives the
// device. Per unit it also keeps the landing buffer of the reduced gradient
// and, in bf16, the compute copy AdamW writes for upload (in fp32 the masters
// are uploaded). ZenFlow (zenflow.h) adds an accumulator of the gradients of
// the columns the device does not update.
// A plain offloaded step: each unit's reduced gradient comes to the host, the
// worker updates the unit while the next unit's gradient is copied, and the
// unit's compute copy goes back to the device's parameter store. With
// offload.delayed_update the updates are only queued; publish_pending() (at
// the next step's optimizer phase, or a save) uploads them, so step N+1's
// forward and backward see the parameters before step N's update.
// Invariant: the host state is touched only by the worker while jobs are
// queued, and by the caller only after wait_for_worker(); the device copy of
// a unit changes only in publish(), ordered after its update.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.h"
#include "model/optimizer.h"
#include "parallel/grad_store.h"
#include "parallel/param_store.h"
#include "parallel/unit_shards.h"
#include "runtime/arena.h"
#include "runtime/worker_thread.h"

namespace llm {

// Bytes across the host <-> device link and the host's work since construction.
struct OffloadStats {
  uint64_t to_host_bytes = 0, to_device_bytes = 0;
  double host_seconds = 0;  // the worker's busy time
  double wait_seconds = 0;  // the caller's time blocked on the worker
};

class HostOptimizer {
 public:
  struct Unit {
    float* masters = nullptr;      // (s) owned fp32 masters
    float* m = nullptr;            // (s)
    float* v = nullptr;            // (s)
    float* grads = nullptr;        // (s) the reduced gradient, copied from the device
    Bf16* compute = nullptr;       // bf16 precision: (s) the compute copy to upload
    float* accumulated = nullptr;  // ZenFlow: (s) sum of the step-scaled gradients
  };
  static void list_buffers(const std::vector<UnitShard>& shards, Precision precision,
                           bool accumulator, std::vector<Unit>& units, BufferPlan& host);

  HostOptimizer(const ParameterLayout& layout, const Config& config,
                const std::vector<UnitShard>& shards, const Backend& device, ParamStore& params,
                GradStore& grads);

  size_t bytes() const { return arena_.capacity(); }
  const Unit& unit(int u) const { return units_[u]; }
  // A snapshot of the counters (the worker's busy time read now).
  OffloadStats stats();

  // Plain ZeRO-Offload step (every owned element, AdamW on the host), left
  // pending with offload.delayed_update.
  void step(const AdamWStep& step);
  // Uploads what a delayed step left queued (nothing when none is).
  void publish_pending();
  bool settled() const { return !pending_; }

  // --- pieces ZenFlow composes ---------------------------------------------
  // The unit's reduced gradient into unit(u).grads (waits for the device).
  void fetch_grads(int u);
  // Queues AdamW on elements [0, owned) of the unit on the worker: gradient
  // `grads` (host, owned elements) times grad_scale.
  void queue_update(int u, const AdamWStep& step, const float* grads);
  void queue(std::function<void()> job) { worker_.submit(std::move(job)); }
  void wait_for_worker();
  // The unit's compute copy (owned elements) to the parameter store, queued
  // on the device; then (all units) the store makes its copy whole.
  void publish(int u);
  void publish_all();

  // The full masters of `unit` into host `out` from every member's owned
  // masters (`owned`, host memory): a collective over the shard group when
  // the masters are sharded.
  void gather_masters(Group& shard_group, int u, const float* owned, float* out);

 private:
  const ParameterLayout& layout_;
  const TrainingConfig& training_;
  const std::vector<UnitShard>& shards_;
  const Backend& device_;
  ParamStore& params_;
  GradStore& grads_;
  const Precision precision_;
  const bool delayed_;  // offload.delayed_update
  Arena arena_;
  std::vector<Unit> units_;
  bool pending_ = false;  // a delayed step's updates are queued, not yet uploaded
  OffloadStats stats_;
  // On a GPU the host's cores are the worker's; on the CPU backend they also
  // run the "device" work, so the worker takes one thread at the lowest
  // priority and leaves the cores to the forward and backward it overlaps.
  WorkerThread worker_;  // last: joins before the buffers go
};

}  // namespace llm
