// Which devices this build and this machine have, and their memory tables.
// The CUDA answers come from cuda_runtime.cu when the CUDA backend is
// compiled, else from device_nocuda.cc (no devices; asking for CUDA memory
// throws), so callers never need #ifdef.
#pragma once

#include "device/device_memory.h"

namespace llm {

enum class Device { cpu, cuda };

// Whether this build has the CUDA backend, and whether that backend is the
// emulation that runs its kernels on the CPU (cuda_emulation/, CMake
// LLM_CUDA_EMULATION): defined by the backend's sources, so that everything
// else is compiled once for every backend.
extern const bool kBuiltWithCuda;
extern const bool kCudaEmulated;

// training.attention: which GPU kernel runs attention on bf16 storage (fp32
// storage and the CPU always run the hand-written kernels). cudnn: cuDNN's
// fused flash attention (model/cudnn/), an error in a build without cuDNN;
// flash: the hand-written flash-style kernel (model/kernels/attention.cu);
// automatic: cudnn when the build has it, else flash. With cudnn, a shape
// cuDNN refuses runs the flash kernel (one warning per shape).
enum class AttentionKernel { automatic, cudnn, flash };

// Whether this build has cuDNN attention (never under emulation).
extern const bool kBuiltWithCudnn;

// Number of CUDA devices usable by this process (0 in a CPU-only build).
int cuda_device_count();
// Makes CUDA device `ordinal` current for this process (before any other CUDA call).
void cuda_use_device(int ordinal);
// training.gemm_autotune: off (the default), each GEMM shape runs cuBLASLt's
// first heuristic algorithm, the same in every process, so a config and seed
// give the same bits run after run; on, the heuristic's top few are timed on
// the shape's first call and the fastest kept (model/kernels/matmul.cu), which
// two processes may pick differently. Set before the first GEMM.
void cuda_set_gemm_autotune(bool on);
// training.deterministic: on (the default), cuDNN's attention backward runs
// its deterministic algorithm, so a config and seed give the same bits run
// after run; off, its fastest one, which sums with atomics
// (model/cudnn/attention_cudnn.cpp). The flash kernel is deterministic
// either way. Set before the first backward.
void cuda_set_deterministic(bool on);
// cudaMalloc'ed memory with copies on the compute stream.
const DeviceMemory& cuda_memory();
// Free bytes on the current CUDA device.
size_t cuda_free_bytes();
// Bytes in use on the current CUDA device (total less free): this process's
// allocations, its CUDA context and library workspaces, and other processes'.
size_t cuda_used_bytes();

}  // namespace llm
