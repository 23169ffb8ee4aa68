// MemoryMonitor: the host's resident set, or the CUDA device's used bytes.
#include "device/memory_usage.h"

#include <algorithm>

#include "base/system.h"

namespace llm {

MemoryUsage MemoryMonitor::sample() {
  MemoryUsage usage;
  usage.allocated = allocated_;
  if (device_ == Device::cpu) {
    usage.reserved = resident_bytes();
    peak_ = std::max(peak_resident_bytes(), usage.reserved);
  } else {
    usage.reserved = cuda_used_bytes();
    peak_ = std::max(peak_, usage.reserved);
  }
  usage.peak = peak_;
  return usage;
}

}  // namespace llm
