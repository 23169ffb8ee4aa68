// The host side every CUDA source shares: the error check, the streams
// and grow-only scratch buffers (what kernels share in device code is in
// device/cuda_kernel_helpers.cuh).
// Invariants: every kernel of the CUDA backend is launched on compute_stream()
// and its launcher returns without waiting for it; the host waits for the
// compute stream only where it needs a result or must free a host buffer:
// allocate (start-up), to_device, to_host and synchronize of cuda_memory(),
// rope_table (its host table is temporary) and, with gemm_autotune(), the
// first use of each GEMM shape (matmul.cu times cuBLASLt's candidates for it).
// Collectives run on gather_stream() (all-gather, broadcast) or
// reduce_stream() (reduce-scatter, all-reduce), point-to-point messages on
// p2p_stream(), ordered against compute with events, so a parameter prefetch
// never queues behind a gradient reduction, nor a pipeline message behind
// either; the offloaded optimizer's copies run on a transfer stream of their
// own (cuda_memory()'s queued copies), so they overlap compute; a failed CUDA call throws
// llm::Error naming the call, the CUDA error, file and line (main() adds the rank and takes the job
// down).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "device/cuda_launch.cuh"

namespace llm::cuda {

[[noreturn]] void throw_cuda_error(const char* call, const char* error, const char* file, int line);
// The same for a failure of the machine or the network (RestartableError).
[[noreturn]] void throw_restartable_cuda_error(const char* call, const char* error,
                                               const char* file, int line);
// "NCCL error: <what> failed: <error>", restartable (RestartableError) or
// not (a bad argument or use of NCCL is ours).
[[noreturn]] void throw_nccl_failure(const char* what, const char* error, bool restartable,
                                     const char* file, int line);

// The stream every kernel and device copy of the backend is queued on, and the
// three communication uses: one for gathers and broadcasts (what compute waits
// for next), one for reductions, one for point-to-point messages (pipeline
// stages). Created on first use on the current device.
cudaStream_t compute_stream();
cudaStream_t gather_stream();
cudaStream_t reduce_stream();
cudaStream_t p2p_stream();

// Block the host until `stream` has run everything queued on it so far /
// until `event`'s latest record has run, polled under the watchdog
// (collectives/watchdog.h): a stream behind a collective stalled on a lost peer
// expires at parallel.timeout instead of hanging. Every host wait of the
// backend goes through these. Throw llm::Error on a CUDA error.
void wait_for_stream(cudaStream_t stream);
void wait_for_event(cudaEvent_t event);

// Whether GEMM algorithms are timed per shape (cuda_set_gemm_autotune in
// device/device.h; off by default).
bool gemm_autotune();
// Whether library kernels must give the same bits every run
// (cuda_set_deterministic in device/device.h).
bool deterministic();

// Changes whenever a GrowingScratch buffer moves: a device graph captured
// before holds its old address (device/device_graphs.h).
uint64_t scratch_epoch();

// A kernel family's device temporaries (sort buffers, partial sums) sized by
// the call: reserve() grows the buffer, stream-ordered on the compute stream
// (cudaFreeAsync / cudaMallocAsync, so reserve() does not wait for the
// stream and no queued kernel loses memory it still reads), and never shrinks it. A run calls with
// fixed shapes, so each allocates on its first step only; growing inside a
// device graph's capture is refused (the shape was not run eagerly first). One process drives
// one device, so a static instance per use serves every call; process exit
// reclaims it (freeing at exit could race the CUDA context's teardown).
class GrowingScratch {
 public:
  // At least `bytes` bytes; the contents are undefined after a growth.
  void* reserve(size_t bytes);
  size_t capacity() const { return capacity_; }

 private:
  void* buffer_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace llm::cuda

#define LLM_CUDA_CHECK(call)                                                               \
  do {                                                                                     \
    cudaError_t llm_cuda_status_ = (call);                                                 \
    if (llm_cuda_status_ != cudaSuccess)                                                   \
      ::llm::cuda::throw_cuda_error(#call, cudaGetErrorString(llm_cuda_status_), __FILE__, \
                                    __LINE__);                                             \
  } while (0)

// After a kernel launch: reports a bad launch configuration at its call site.
#define LLM_CUDA_CHECK_LAUNCH() LLM_CUDA_CHECK(cudaGetLastError())
