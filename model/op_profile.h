// Where a training step's time goes, op by op (`./train bench --profile`): a
// Backend whose every op calls the wrapped backend's op, then marks the time
// on the device's timeline (device/timeline.h: an event on the compute
// stream of a GPU, the host clock on the CPU). An op's time runs from the
// previous mark (the previous op's, or the step's start) to its own: its own
// work plus any wait before it that the device saw (a launch gap, host work
// between ops, a copy, a wait for a collective), so the ops of a step add up
// to the step but for its tail after the last op. The wrappers are generated
// from LLM_TYPED_OPS and LLM_NAMED_OPS (model/backend.h): no op is left out
// and none is named twice.
// Invariants: ops are called from one host thread; marks count only between
// begin_step and end_step; one profiled backend exists at a time (each op's
// wrapper keeps the wrapped op in a static slot), bound to its OpProfile
// until that is destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/timeline.h"
#include "model/backend.h"

namespace llm {

// One op's totals over the profiled steps.
struct OpTotal {
  std::string name;  // "matmul_forward<bf16>" (typed ops: <f32> or <bf16>), "adamw_update"
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;  // counted from each call's shapes for the matmuls, else 0
};

class OpProfile {
 public:
  // Times ops on `device`'s timeline (CUDA: on the device current at the
  // first mark).
  explicit OpProfile(Device device);
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  Device device() const { return device_; }
  // A step's start: waits for the device's queued work, then marks.
  void begin_step();
  // Marks the step's end, waits for the device to pass it, and adds the
  // step's op times.
  void end_step();

  int steps() const { return steps_; }
  // Host time of the steps, summed: each from begin_step's start (the device
  // idle) to the end of end_step's wait.
  double step_seconds() const { return step_seconds_; }
  // The ops' times summed (at most step_seconds; the rest is the steps' tails
  // after their last op and the host's latency at their start and end).
  double op_seconds() const { return op_seconds_; }
  // Every op called in the steps, the most time first.
  std::vector<OpTotal> totals() const;

  // For the profiled backend's ops: op `op` (an index into the generated op
  // list) has been queued, with `flops` of work.
  void mark(int op, double flops);

 private:
  Device device_;
  std::unique_ptr<Timeline> timeline_;
  bool in_step_ = false;
  std::vector<int> step_ops_;  // the op of each mark of the current step, after its start
  double step_start_ = 0;      // host seconds at the step's start mark
  int steps_ = 0;
  double step_seconds_ = 0, op_seconds_ = 0;
  std::vector<int64_t> calls_;  // by op index
  std::vector<double> seconds_, flops_;
};

// `inner`'s ops, each followed by a mark in `profile` (its device and memory
// are inner's). The returned table stays valid while `profile` lives; one
// profile binds one inner backend (a second call with another throws).
Backend profiled(const Backend& inner, OpProfile& profile);

}  // namespace llm
