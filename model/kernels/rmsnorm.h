// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, one row of C at a time, in
// storage type T (float or Bf16); rstd and dweight are fp32 in both.
// Invariant: forward saves rstd (one float per row) so backward never
// recomputes the row statistics; backward accumulates (+=) into its outputs.
// Either pass can write each output row's amax beside it (row_amax), so an
// FP8 matmul that reads the output skips its own amax pass (base/fp8.h);
// under delayed scaling the forward writes the matmul's e4m3 codes too
// (rmsnorm_forward_fp8), so the matmul skips its cast as well.
#pragma once

#include <cstdint>

#include "base/fp8.h"
#include "base/storage_types.h"

namespace llm::cpu {

// out (N, C), rstd (N) = 1 / sqrt(mean(inp^2) + eps), inp (N, C), weight (C);
// row_amax (N), when not null: each row's largest |out| as stored
// (fp8_amax_of of the row: NaN if the row holds one).
template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps,
                     float* row_amax);

// rmsnorm_forward, and in the same pass codes (N, C) = fp8_cast_transpose's
// e4m3 codes of out (as stored) with `scale` (row-major); row_amax may be null.
template <class T>
void rmsnorm_forward_fp8(T* out, float* rstd, const T* inp, const T* weight, int N, int C,
                         float eps, float* row_amax, uint8_t* codes, const Fp8Scale* scale);

// dinp (N, C) += d(loss)/d(inp); dweight (C) += d(loss)/d(weight), summed over
// rows in row order (deterministic); dout (N, C) is d(loss)/d(out). In bf16,
// each dinp element is read, added to in fp32 and rounded once. row_amax
// (N), when not null: each row's largest |dinp| as stored after the +=
// (fp8_amax_of of the row: NaN if the row holds one).
template <class T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                      const float* rstd, int N, int C, float* row_amax);

}  // namespace llm::cpu

// CUDA twins (rmsnorm.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps,
                     float* row_amax);
template <class T>
void rmsnorm_forward_fp8(T* out, float* rstd, const T* inp, const T* weight, int N, int C,
                         float eps, float* row_amax, uint8_t* codes, const Fp8Scale* scale);
template <class T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                      const float* rstd, int N, int C, float* row_amax);

}  // namespace llm::cuda
