// The one way kernels are launched and dynamic shared memory is declared, so
// that the same source builds for nvcc and for the CUDA emulation
// (cuda_emulation/, -DLLM_CUDA_EMULATION=ON), which runs kernels on the CPU.
// Under nvcc, launch(kernel, grid, block, shared_bytes, stream, args...) is
// kernel<<<grid, block, shared_bytes, stream>>>(args...); under emulation it
// queues the grid on the emulated stream. Either way a bad configuration is
// reported by cudaGetLastError (LLM_CUDA_CHECK_LAUNCH after the launch).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

// Host C++ built against the real CUDA headers (cuDNN's sources) includes
// this file too, and launches nothing: the helper exists where kernels do.
#if defined(LLM_CUDA_EMULATION) || defined(__CUDACC__)
namespace llm::cuda {

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
            cudaStream_t stream, Args&&... args) {
#ifdef LLM_CUDA_EMULATION
  ::cuda_emulation::launch_kernel(kernel, grid, block, shared_bytes, stream,
                                  std::forward<Args>(args)...);
#else
  // clang-format takes .cuh for C++ and would split the >>>.
  // clang-format off
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  // clang-format on
#endif
}

}  // namespace llm::cuda
#endif

// A kernel's dynamic shared memory as `type name[]`, 128-byte aligned.
#ifdef LLM_CUDA_EMULATION
#define LLM_DYNAMIC_SHARED(type, name) \
  type* const name = static_cast<type*>(::cuda_emulation::dynamic_shared_memory())
#else
#define LLM_DYNAMIC_SHARED(type, name) extern __shared__ __align__(128) type name[]
#endif
