// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, one row of C at a time, in
// fp32 or bf16 (`_bf16`) storage; rstd and dweight are fp32 in both.
// Invariant: forward saves rstd (one float per row) so backward never
// recomputes the row statistics; backward accumulates (+=) into its outputs.
#pragma once

#include "runtime/bf16.h"

namespace llm::cpu {

// out (N, C), rstd (N) = 1 / sqrt(mean(inp^2) + eps), inp (N, C), weight (C).
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                     float eps);
void rmsnorm_forward_bf16(Bf16* out, float* rstd, const Bf16* inp, const Bf16* weight, int N, int C,
                          float eps);

// dinp (N, C) += d(loss)/d(inp); dweight (C) += d(loss)/d(weight), summed over
// rows in row order (deterministic); dout (N, C) is d(loss)/d(out). In bf16,
// each dinp element is read, added to in fp32 and rounded once.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C);
void rmsnorm_backward_bf16(Bf16* dinp, float* dweight, const Bf16* dout, const Bf16* inp,
                           const Bf16* weight, const float* rstd, int N, int C);

}  // namespace llm::cpu

// CUDA twins (rmsnorm.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                     float eps);
void rmsnorm_forward_bf16(Bf16* out, float* rstd, const Bf16* inp, const Bf16* weight, int N, int C,
                          float eps);
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C);
void rmsnorm_backward_bf16(Bf16* dinp, float* dweight, const Bf16* dout, const Bf16* inp,
                           const Bf16* weight, const float* rstd, int N, int C);

}  // namespace llm::cuda
