// A Group for device buffers over a host Group: each collective copies its
// input from the device into a host staging buffer, runs the host collective
// (MPI), and copies the result back when waited on; a send stages its input
// the same way, a receive copies its message to the device when waited on.
// This is the `parallel.comm = "mpi"` path of the GPU trainer: slower than
// NCCL, but it lets several ranks share one GPU (which NCCL refuses), so the
// distributed GPU code can be tested on a single device. With host memory it
// is a plain (copying) wrapper, which is how the CPU tests exercise it.
// Invariant: a staged collective or message gives the bits its host one
// gives; staging buffers are reused across calls (they grow to the largest
// call in flight, then no more allocation happens).
#pragma once

#include <memory>

#include "device/device_memory.h"
#include "parallel/comm.h"

namespace llm {

// Wraps `host` (not owned; it must outlive the result).
std::unique_ptr<Group> make_staged_group(Group& host, const DeviceMemory& memory);

}  // namespace llm
