// Linear layers without bias, y = x W^T, through gemm (cpu_gemm.h), with
// operands of storage type T (float or Bf16). Every product accumulates in
// fp32; bf16 results are rounded once, and dweight is an fp32 buffer in both
// precisions. matmul_forward_residual adds the residual stream in the GEMM's
// epilogue (beta = 1), so the transformer's residual connections need no
// separate add pass; that also subsumes a "residual add fused into the next
// RMSNorm": no add pass is left to fuse.
// Invariant: dweight accumulates (+=) so gradient accumulation over
// micro-batches and tied weights need no extra buffers; dinp is overwritten.
#pragma once

#include "base/storage_types.h"

namespace llm::cpu {

// out (N, OC) = inp (N, C) @ weight (OC, C)^T.
template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, int N, int C, int OC);

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + residual (N, OC), summed in
// fp32 and rounded once (bf16). out may be residual itself or a buffer that
// does not overlap it.
template <class T>
void matmul_forward_residual(T* out, const T* inp, const T* weight, const T* residual, int N, int C,
                             int OC);

// dinp (N, C) = dout (N, OC) @ weight (skipped when dinp is null);
// dweight (OC, C) += dout^T @ inp.
template <class T>
void matmul_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC);

}  // namespace llm::cpu

// CUDA twins (matmul.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, int N, int C, int OC);
template <class T>
void matmul_forward_residual(T* out, const T* inp, const T* weight, const T* residual, int N, int C,
                             int OC);
template <class T>
void matmul_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC);

}  // namespace llm::cuda
