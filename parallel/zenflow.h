// ZenFlow (DeepSpeed, 2025) on top of the host optimizer: the important
// columns of every weight matrix are updated on the device each step, with
// their own masters and AdamW moments there; the gradients of the others are
// accumulated on the host and applied by the host's AdamW every
// update_interval steps, overlapped with the next step when overlap_step.
// The semantics, step by step, are written out in docs/offload.md ("CPU offload
// and ZenFlow"); in short, for step t (1-based) with clipped gradient g_t:
//  - t <= full_warm_up_rounds: plain offloaded AdamW on every element.
//  - Otherwise steps group into intervals of U = update_interval. At an
//    interval's first step the columns are chosen again when none are chosen
//    or select_interval steps have passed: per matrix, the k = ceil(topk_ratio
//    * cols) columns of largest ||g_t[:, c]|| (ties: lower column first),
//    from per-column squared norms all-reduced over the shard group (cols
//    floats per matrix cross ranks, never gradients). 1-D tensors (norm
//    gains) are always wholly chosen.
//  - Chosen elements: AdamW(g_t) at step t, every step, on the device.
//  - The others: a_t += g_t on the host; at the interval's last step AdamW
//    with gradient a / U at that step's t and learning rate, then a = 0. The
//    result is seen by the next step's forward, or with overlap_step by the
//    one after (the host works during the next forward and backward).
//  - Every element has one (master, m, v): the device holds those of chosen
//    columns while they are chosen and hands them back when deselected.
//  - settle() (a checkpoint save) ends the interval early: pending work is
//    applied, a partial sum a of n steps is applied as a / n, the device
//    hands every column back, and the next step starts a new interval.
// Invariant: every member of a shard group makes the same choice (the norms
// are all-reduced), and the host and device never update the same element's
// state in one interval (the host's copies of chosen elements are
// overwritten when the device hands them back).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "parallel/host_optimizer.h"
#include "parallel/topology.h"

namespace llm {

struct ZenFlowStats {
  uint64_t selections = 0;
  uint64_t host_updates = 0;
  uint64_t selection_bytes = 0;  // payload of the per-column norm all-reduces
  int update_interval = 0;       // the interval in force (adapted when auto)
};

class ZenFlow {
 public:
  // One tensor's part of a unit's owned slice, as a row-major matrix whose
  // elements [lo, hi) this rank holds; its chosen columns' state on the device.
  struct Piece {
    int unit = 0, tensor = 0;
    size_t lo = 0, hi = 0;             // tensor-relative flat range
    size_t slice_offset = 0;           // where lo sits in the unit's owned slice
    size_t cols = 0, k = 0;            // columns, chosen columns
    size_t compact = 0;                // rows * k
    bool always_chosen = false;        // 1-D tensors
    std::vector<int32_t> chosen_host;  // (k) the chosen columns, as made
    int32_t* chosen = nullptr;         // (k) device: the same
    float* masters = nullptr;          // (compact) device, and below
    float* m = nullptr;
    float* v = nullptr;
    float* grads = nullptr;
  };
  // The device buffers: chosen-column state (optimizer) and the norms (buffers).
  static void list_buffers(const ParameterLayout& layout, const std::vector<UnitShard>& shards,
                           double topk_ratio, std::vector<Piece>& pieces, float*& norms,
                           StatePlans& plans);

  // Where each matrix's column norms sit in the one buffer all-reduced for a
  // choice (0 for 1-D tensors, which have none); `count` gets its length,
  // the floats one choice moves across ranks.
  static std::vector<size_t> column_norm_offsets(const ParameterLayout& layout, size_t& count);

  ZenFlow(const ParameterLayout& layout, const Config& config, const std::vector<UnitShard>& shards,
          const Backend& device, Topology& topology, ParamStore& params, GradStore& grads,
          HostOptimizer& host, StatePlans& plans);
  // Waits for the jobs it queued on the host's worker (they use its members).
  ~ZenFlow();
  ZenFlow(const ZenFlow&) = delete;
  ZenFlow& operator=(const ZenFlow&) = delete;

  void step(const AdamWStep& step);
  // A save point: see the header comment. Afterwards the host holds every
  // element's current state and the device copy matches it.
  void settle();
  bool settled() const { return !pending_ && !chosen_ && in_interval_ == 0; }
  // Loaded state replaced the host's: start afresh (no choice, no partial sum).
  void reset();
  // Steps of one pass over the training data (select_strategy = epoch).
  void set_steps_per_epoch(int steps) { steps_per_epoch_ = steps; }
  const ZenFlowStats& stats() const { return stats_; }
  // The current masters of the unit's owned elements into host `out`: the
  // host's, with the chosen columns' from the device (after the worker is idle).
  void current_masters(int unit, float* out);

 private:
  void choose_columns();
  void hand_back_columns();
  // One array of chosen-column state (masters, m or v) between the host's
  // owned slice of the piece's unit and the device's compact buffer.
  void chosen_to_device(const Piece& p, const float* host_slice, float* compact);
  void chosen_to_host(const Piece& p, const float* compact, float* host_slice);
  void update_chosen_on_device(const AdamWStep& step);
  // The chosen columns' masters into the parameter store's compute copy.
  void scatter_chosen();
  void accumulate_on_host(const AdamWStep& step);
  // AdamW over the accumulated sum of `steps` steps, on the worker.
  void queue_host_update(const AdamWStep& step, int steps);
  void publish_host_update();
  int select_interval() const;
  void adapt_update_interval();

  const ParameterLayout& layout_;
  const TrainingConfig& training_;
  const ZenFlowConfig& zenflow_;
  const std::vector<UnitShard>& shards_;
  const Backend& be_;
  Topology& topo_;
  ParamStore& params_;
  GradStore& grads_;
  HostOptimizer& host_;
  std::vector<Piece> pieces_;
  std::vector<size_t> norm_offset_;  // per tensor: its columns in norms_ (matrices only)
  size_t norm_count_ = 0;
  float* norms_ = nullptr;   // (norm_count_) device
  bool chosen_ = false;      // the device holds chosen columns
  bool pending_ = false;     // a host update is queued, not yet uploaded
  int in_interval_ = 0;      // steps accumulated since the last host update
  int since_selection_ = 0;  // steps since the last choice
  int update_interval_;
  int steps_per_epoch_ = 0;
  AdamWStep last_step_{};
  std::atomic<double> host_update_seconds_{0};  // of the last host update (written by the worker)
  double step_started_ = -1;                    // wall clock of the previous step() (auto interval)
  double step_seconds_ = 0;
  ZenFlowStats stats_;
};

}  // namespace llm
