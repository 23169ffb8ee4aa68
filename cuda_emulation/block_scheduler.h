// Runs a kernel's grid on the calling host thread: its blocks one after
// another, each block's threads as fibers that switch only at barriers, warp
// operations and exit (device_language.h's rendezvous).
// Scheduling order (LLM_CUDA_EMULATION_ORDER=forward, the default, or
// reverse): the order of the blocks and, after every rendezvous, of the
// threads. A barrier a kernel is missing lets some threads read shared
// memory before others have written it under one order or the other; the
// tests run under both.
// Invariants: at most one block runs per host thread at a time; a fault
// (threads meeting different barriers, a barrier or warp operation some
// threads can never reach, an emulation limit) abandons the grid and is
// returned as a message, never thrown across fibers.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

namespace cuda_emulation {

enum class ScheduleOrder { forward, reverse };

// The order of this process, read once from LLM_CUDA_EMULATION_ORDER.
ScheduleOrder schedule_order();

struct Grid {
  dim3 grid, block;
  size_t shared_bytes;
  std::function<void()> thread;  // the kernel with its arguments, run by every thread
};

// Empty when every thread of every block ran to its end, else what went wrong.
std::string run_grid(const Grid& grid);

}  // namespace cuda_emulation
