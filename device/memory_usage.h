// The memory of the device a run trains on, as the step log and metrics
// report it: allocated (what the run's arenas hold there, fixed at start),
// reserved (what is in use now: on the CPU this process's resident set; on
// CUDA total less free, which includes the CUDA context, library workspaces
// and other processes on the same GPU) and peak (on the CPU the peak resident
// set; on CUDA the most reserved seen by a sample, since the driver keeps no
// peak).
// Invariant: peak >= reserved of every sample taken so far.
#pragma once

#include <cstddef>

#include "device/device.h"

namespace llm {

struct MemoryUsage {
  size_t allocated = 0, reserved = 0, peak = 0;
};

class MemoryMonitor {
 public:
  MemoryMonitor(Device device, size_t allocated) : device_(device), allocated_(allocated) {}
  MemoryUsage sample();

 private:
  Device device_;
  size_t allocated_;
  size_t peak_ = 0;
};

}  // namespace llm
