// Fibers for the kernel emulation: a host thread runs a block's GPU threads
// one at a time, each on a stack of its own, switching only where a thread
// waits (a barrier, a warp operation) or ends. The switch is a few
// instructions (fiber_switch.S), told to AddressSanitizer through its fiber
// interface, so it checks each fiber's stack as a stack. ThreadSanitizer is
// not told: to it a block's fibers are their host thread, one after another
// in program order, which is what the scheduler makes them, so it checks the
// races between streams (host threads); within a block, the scheduling
// orders do. (Told, it synchronizes clocks at every switch: 7x slower.)
// Invariants: a fiber runs only on the host thread that made it; a context
// is switched away from only while it runs; stacks have a guard page below
// them, so an overflow faults instead of corrupting a neighbour.
#pragma once

#include <cstddef>

namespace cuda_emulation {

class FiberContext {
 public:
  // The calling host thread's own context (its ordinary stack).
  FiberContext();
  // A new fiber that will run function(argument) when first switched to;
  // the function must never return (it switches away for the last time).
  FiberContext(void (*function)(void*), void* argument, size_t stack_bytes);
  ~FiberContext();
  FiberContext(const FiberContext&) = delete;
  FiberContext& operator=(const FiberContext&) = delete;

  // Saves the running context `from` and resumes `to`; returns when another
  // context switches back to `from`.
  static void switch_to(FiberContext& from, FiberContext& to);

  // Called first thing by a new fiber's function (sanitizer bookkeeping).
  void started();

 private:
  void* stack_pointer_ = nullptr;
  void* mapping_ = nullptr;  // guard page + stack; null for a thread's own context
  size_t mapping_bytes_ = 0;
  const void* stack_bottom_ = nullptr;  // for AddressSanitizer
  size_t stack_bytes_ = 0;
  void* fake_stack_ = nullptr;            // AddressSanitizer's, saved while switched away
  FiberContext* resumed_from_ = nullptr;  // the context that last switched to this one
};

}  // namespace cuda_emulation
