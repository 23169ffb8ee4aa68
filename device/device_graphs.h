// Device graphs as a table of plain functions: a stretch of device work
// captured once and replayed by one launch (CUDA graphs), so that a small
// model's step is not bound by the host's kernel launches. The CUDA table is
// device/cuda_graphs.cu; the CPU has none (a backend's pointer is null).
// Invariants: between begin_capture and end_capture nothing queued on the
// compute stream runs and no host may wait for it; a graph replays its
// kernels with the arguments they were captured with (pointers included),
// so it is valid while the buffers it names are: scratch_epoch() changes
// whenever a grow-only scratch buffer moves, and a graph captured under
// another epoch must not be launched.
#pragma once

#include <cstdint>

namespace llm {

using DeviceGraph = void*;  // an executable graph (cudaGraphExec_t on CUDA)

struct DeviceGraphs {
  // From now on the compute stream's work is captured, not run.
  void (*begin_capture)();
  // Ends the capture: the executable graph of what was queued since. Nothing
  // of it has run.
  DeviceGraph (*end_capture)();
  // Queues the graph's work on the compute stream.
  void (*launch)(DeviceGraph graph);
  void (*destroy)(DeviceGraph graph);
  uint64_t (*scratch_epoch)();
};

// The CUDA backend's table (only a CUDA build defines it).
const DeviceGraphs& cuda_device_graphs();

}  // namespace llm
