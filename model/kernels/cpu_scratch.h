// Grow-only per-thread fp32 scratch for the CPU kernels: buffers that a
// kernel needs on every call (widened operands, attention tiles) are kept
// between calls instead of being allocated, page-faulted in and freed each
// time.
// Invariant: a buffer belongs to one (Owner, slot) pair and one thread, and
// only grows: once a kernel has run at its largest shape on a thread, its
// calls there allocate nothing. Contents are not cleared between calls.
#pragma once

#include <cstddef>
#include <vector>

namespace llm::cpu {

// At least n floats of this thread's buffer `slot` of Owner (a tag type per
// kernel file, so two kernels never share a buffer).
template <class Owner, int kSlots>
float* thread_scratch(int slot, size_t n) {
  thread_local std::vector<float> buffers[kSlots];
  std::vector<float>& buffer = buffers[slot];
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

}  // namespace llm::cpu
