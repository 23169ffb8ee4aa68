// Timestamps of a device's work in the order it runs, for profiling (the op
// profile of `./train bench --profile`, model/op_profile.h): mark() notes the
// point after everything queued on the device so far, intervals() gives the
// time between consecutive marks. On a GPU a mark is a CUDA event recorded on
// the compute stream, where every kernel runs (device/cuda_runtime.cuh), so
// marking never makes the host wait; on the CPU, whose ops are done when they
// return, it is the host clock.
// Invariants: the timeline's events are created on first use and reused by
// every later series (none is created per mark once the pool is as large as
// a series); mark, wait and intervals are called from one host thread.
#pragma once

#include <memory>
#include <vector>

#include "device/device.h"

namespace llm {

class Timeline {
 public:
  virtual ~Timeline() = default;
  // A timestamp after the work queued on the device so far; returns at once.
  virtual void mark() = 0;
  // Returns once the device has passed the last mark.
  virtual void wait() = 0;
  // Waits for the last mark, then returns the seconds between consecutive
  // marks (one fewer than the marks, none for fewer than two) and forgets
  // them: the next mark starts a new series.
  virtual std::vector<double> intervals() = 0;
};

// The timeline of `device`: the host clock for the CPU, CUDA events for CUDA
// (make_cuda_timeline).
std::unique_ptr<Timeline> make_timeline(Device device);

// Events on the compute stream of the current CUDA device, created when first
// marked (timeline_cuda.cu; in a build without CUDA, timeline_nocuda.cc
// throws).
std::unique_ptr<Timeline> make_cuda_timeline();

}  // namespace llm
