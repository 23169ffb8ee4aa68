// Linear layers without bias, y = x W^T, through the BLAS (sgemm).
// Invariant: dweight accumulates (+=) so gradient accumulation over
// micro-batches and tied weights need no extra buffers; dinp is overwritten.
#pragma once

namespace llm::cpu {

// out (N, OC) = inp (N, C) @ weight (OC, C)^T.
void matmul_forward(float* out, const float* inp, const float* weight, int N, int C, int OC);

// dinp (N, C) = dout (N, OC) @ weight (skipped when dinp is null);
// dweight (OC, C) += dout^T @ inp.
void matmul_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);

}  // namespace llm::cpu
