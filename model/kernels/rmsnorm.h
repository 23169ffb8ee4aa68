// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, one row of C at a time.
// Invariant: forward saves rstd (one float per row) so backward never
// recomputes the row statistics; backward accumulates (+=) into its outputs.
#pragma once

namespace llm::cpu {

// out (N, C), rstd (N) = 1 / sqrt(mean(inp^2) + eps), inp (N, C), weight (C).
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                     float eps);

// dinp (N, C) += d(loss)/d(inp); dweight (C) += d(loss)/d(weight), summed over
// rows in row order (deterministic); dout (N, C) is d(loss)/d(out).
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C);

}  // namespace llm::cpu
