// What every CUDA source shares: the error check, the two streams, launch
// geometry, alignment tests, grow-only scratch buffers and bf16 <-> fp32
// conversion in device code.
// Invariants: every kernel of the CUDA backend is launched on compute_stream()
// and returns without synchronizing the host; collectives run on
// comm_stream(), ordered against compute with events; a failed CUDA call
// throws llm::Error naming the call, the CUDA error, file and line (main()
// adds the rank and takes the job down).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "runtime/bf16.h"

namespace llm::cuda {

[[noreturn]] void throw_cuda_error(const char* call, const char* error, const char* file, int line);

// The stream every kernel and device copy of the backend is queued on, and the
// one collectives use. Created on first use on the current device.
cudaStream_t compute_stream();
cudaStream_t comm_stream();

// Blocks of `threads` covering n elements (at least one block).
inline unsigned blocks_for(size_t n, unsigned threads) {
  size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks == 0 ? 1 : blocks);
}

// Whether p is aligned to `bytes` (a vector access of that width is legal).
inline bool is_aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// A kernel family's device temporaries (sort buffers, partial sums) sized by
// the call: reserve() grows the buffer, stream-ordered on the compute stream
// (cudaFreeAsync / cudaMallocAsync, so the host never blocks and no queued
// kernel loses memory it still reads), and never shrinks it. A run calls with
// fixed shapes, so each allocates on its first step only. One process drives
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

// Loads and stores with fp32 math between, for kernels templated on the
// storage type (float or Bf16, whose bits are a __nv_bfloat16).
__device__ __forceinline__ float load_f32(const float* p) { return *p; }
__device__ __forceinline__ float load_f32(const Bf16* p) {
  return __uint_as_float(static_cast<uint32_t>(p->bits) << 16);
}
__device__ __forceinline__ void store_f32(float* p, float value) { *p = value; }
// Round to nearest even, as float_to_bf16 on the host (NaN stays NaN).
__device__ __forceinline__ void store_f32(Bf16* p, float value) {
  p->bits = __bfloat16_as_ushort(__float2bfloat16_rn(value));
}

}  // namespace llm::cuda

#define LLM_CUDA_CHECK(call)                                                           \
  do {                                                                                 \
    cudaError_t llm_cuda_status_ = (call);                                             \
    if (llm_cuda_status_ != cudaSuccess)                                               \
      ::llm::cuda::throw_cuda_error(#call, cudaGetErrorString(llm_cuda_status_), __FILE__, \
                                    __LINE__);                                         \
  } while (0)

// After a kernel launch: reports a bad launch configuration at its call site.
#define LLM_CUDA_CHECK_LAUNCH() LLM_CUDA_CHECK(cudaGetLastError())
