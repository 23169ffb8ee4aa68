// What the emulated libraries (kernel launches, cuBLASLt, cub, NCCL) use of
// the emulated streams: queue work on a stream, and fail the run.
// Invariants: each stream is one host thread that runs its queue in order,
// one item at a time, so streams run concurrently with each other and with
// the host, as on a GPU; queued work that throws, or calls fail(), sets the
// sticky error: every later item of every stream is skipped and every later
// API call returns it, as after a device fault.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

namespace cuda_emulation {

using Work = std::function<void()>;

// Queues `work` on `stream` (nullptr: the default stream, a stream like the
// others: the project's streams are all non-blocking, so it never waits for
// them nor they for it). Returns the sticky error, if any, without queuing.
cudaError_t enqueue(cudaStream_t stream, Work work);

// The sticky error: a failure of queued work, with a message naming what
// failed. The first one stays; later calls only print theirs.
void fail(cudaError_t error, const std::string& message);
cudaError_t sticky_error();
std::string sticky_error_message();

// Keeps `error` as this host thread's last error (cudaGetLastError's) and
// returns it.
cudaError_t record_last_error(cudaError_t error);

// The stream's place in creation order on this process (the default stream
// is 0): the same on every rank of a job whose ranks create streams in the
// same order.
int stream_index(cudaStream_t stream);

// Waits until every item queued so far on every stream has run.
void wait_for_all_streams();

// Whether [p, p + bytes) lies inside one live device allocation (the
// runtime's memory table, runtime_api.cpp): what a library call that takes
// device buffers, as NCCL's do, may touch.
bool inside_device_allocation(const void* p, size_t bytes);

}  // namespace cuda_emulation
