// Linear layers without bias, y = x W^T, through the BLAS (sgemm), with fp32
// or bf16 (`_bf16`) operands. Every product accumulates in fp32; bf16 results
// are rounded once, and dweight is an fp32 buffer in both precisions.
// Invariant: dweight accumulates (+=) so gradient accumulation over
// micro-batches and tied weights need no extra buffers; dinp is overwritten.
#pragma once

#include "runtime/bf16.h"

namespace llm::cpu {

// out (N, OC) = inp (N, C) @ weight (OC, C)^T.
void matmul_forward(float* out, const float* inp, const float* weight, int N, int C, int OC);
void matmul_forward_bf16(Bf16* out, const Bf16* inp, const Bf16* weight, int N, int C, int OC);

// dinp (N, C) = dout (N, OC) @ weight (skipped when dinp is null);
// dweight (OC, C) += dout^T @ inp.
void matmul_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);
void matmul_backward_bf16(Bf16* dinp, float* dweight, const Bf16* dout, const Bf16* inp,
                          const Bf16* weight, int N, int C, int OC);

}  // namespace llm::cpu

// CUDA twins (matmul.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void matmul_forward(float* out, const float* inp, const float* weight, int N, int C, int OC);
void matmul_forward_bf16(Bf16* out, const Bf16* inp, const Bf16* weight, int N, int C, int OC);
void matmul_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);
void matmul_backward_bf16(Bf16* dinp, float* dweight, const Bf16* dout, const Bf16* inp,
                          const Bf16* weight, int N, int C, int OC);

}  // namespace llm::cuda
