// ZeRO-Offload's host executor: this rank's owned slice of every unit's fp32
// master weights and AdamW moments, in host memory (page-locked on a GPU),
// updated by AdamW on a worker thread while the caller's thread drives the
// device. Per unit it also keeps the landing buffer of the reduced gradient
// and, in bf16, the compute copy AdamW writes for upload (in fp32 the masters
// are uploaded). ZenFlow (zenflow.h) adds an accumulator of the gradients of
// the columns the device does not update.
// A plain offloaded step:
//  - each unit's reduced gradient starts down to the host on the device's
//    transfer queue as soon as the gradient store calls it final, during the
//    backward (zero2 / zero3; ddp and zero1 over several ranks: when the
//    reductions are waited for, before the gradient norm);
//  - at the optimizer step the worker updates unit u as soon as its gradient
//    has landed, while later units' copies go on;
//  - the caller uploads unit u's compute copy as soon as the worker is done
//    with it, on the transfer queue, and the device's next work waits for
//    the uploads.
// With offload.delayed_update the updates are only queued; publish_pending()
// (at the next step's optimizer phase, or a save) uploads them, so step N+1's
// forward and backward see the parameters before step N's update.
// Invariants: the host state is touched only by the worker while jobs are
// queued, and by the caller only after wait_for_worker() (which also waits
// for the transfers); a unit's landing buffer is written only after the jobs
// reading it have finished, and its compute copy only after its last upload
// is done; the device copy of a unit changes only in publish(), ordered
// after its update.
#pragma once

#include <cstdint>
#include <vector>

#include "schema/config.h"
#include "model/optimizer.h"
#include "parallel/grad_store.h"
#include "parallel/param_store.h"
#include "parallel/unit_shards.h"
#include "device/arena.h"
#include "base/worker_thread.h"

namespace llm {

// Bytes across the host <-> device link and the host's work since construction.
struct OffloadStats {
  uint64_t to_host_bytes = 0, to_device_bytes = 0;
  // Of to_host_bytes, the copies started before the optimizer step, as each
  // gradient became final.
  uint64_t to_host_early_bytes = 0;
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
  ~HostOptimizer();  // waits for its transfers: they land in its buffers
  HostOptimizer(const HostOptimizer&) = delete;
  HostOptimizer& operator=(const HostOptimizer&) = delete;

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
  // A step's gradients are about to be computed: copies of the last step's
  // that no update used (a skipped step) are waited for and forgotten.
  void begin_step();
  // Unit u's reduced gradient is final (the engine relays the gradient
  // store's on_final): its copy to the host starts now, unless a queued job
  // still reads its landing buffer (fetch_grads copies it then).
  void gradient_final(int u);
  // The units in the order their gradients land: those whose copies have
  // started, in that order, then the others in unit order. Steps take units
  // in this order, so the host never waits for a late copy while earlier
  // ones sit ready.
  std::vector<int> landing_order() const;

  // --- pieces ZenFlow composes ---------------------------------------------
  // The unit's reduced gradient in unit(u).grads: waits for the copy started
  // when it became final, or makes it now.
  void fetch_grads(int u);
  // Queues AdamW on elements [0, owned) of the unit on the worker: gradient
  // `grads` (host, owned elements) times grad_scale.
  void queue_update(int u, const AdamWStep& step, const float* grads);
  // Queues a job; `reads_grads_of`: the unit whose landing buffer it reads
  // (the next copy into it waits for the job), or -1.
  void queue(std::function<void()> job, int reads_grads_of = -1);
  void wait_for_worker();
  // Unit u's compute copy (owned elements) to the parameter store, on the
  // transfer queue once the unit's last queued update is done. upload_all:
  // every unit (in `order`, or unit order), and the device's later work
  // waits for them; publish_all: then the store makes its copy whole.
  void publish(int u);
  void upload_all(const std::vector<int>& order = {});
  void publish_all(const std::vector<int>& order = {});

  // The full masters of `unit` into host `out` from every member's owned
  // masters (`owned`, host memory): a collective over the shard group when
  // the masters are sharded.
  void gather_masters(Group& shard_group, int u, const float* owned, float* out);

 private:
  // A copy of a unit's reduced gradient to its landing buffer, started this
  // step and not yet used by an update.
  struct GradsCopy {
    int unit;
    uint64_t mark;  // its transfer mark
  };
  const GradsCopy* grads_copy(int u) const;  // null: none started
  const GradsCopy& copy_grads(int u);        // starts one

  void wait_for_job(uint64_t job);

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
  bool pending_ = false;            // a delayed step's updates are queued, not yet uploaded
  std::vector<int> pending_order_;  // the order they were queued in
  OffloadStats stats_;
  std::vector<GradsCopy> grads_copies_;  // in start order: the landing order
  // Per unit: the last job reading its landing buffer, the last job writing
  // its compute copy, and the mark of its last upload (worker job numbers and
  // transfer marks; 0: none).
  std::vector<uint64_t> grads_reader_, update_job_, upload_mark_;
  uint64_t last_mark_ = 0;  // the last transfer this optimizer queued
  // On a GPU the host's cores are the worker's; on the CPU backend they also
  // run the "device" work, so the worker takes one thread at the lowest
  // priority and leaves the cores to the forward and backward it overlaps.
  WorkerThread worker_;  // last: joins before the buffers go
};

}  // namespace llm
