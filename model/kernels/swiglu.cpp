// SwiGLU gating on the CPU: out = silu(gate) * up over rows of [gate | up].
// Invariant: purely elementwise per row; backward overwrites dh13.
#include "model/kernels/swiglu.h"

#include <cstddef>

#include "model/kernels/cpu_exp.h"

namespace llm::cpu {

void swiglu_forward(float* out, const float* h13, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float* gate = h13 + (size_t)n * 2 * F;
    const float* up = gate + F;
    float* o = out + (size_t)n * F;
#pragma omp simd
    for (int i = 0; i < F; i++) {
      const float sigmoid = 1.0f / (1.0f + exp_vectorizable(-gate[i]));
      o[i] = gate[i] * sigmoid * up[i];
    }
  }
}

void swiglu_backward(float* dh13, const float* dout, const float* h13, int N, int F) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float* gate = h13 + (size_t)n * 2 * F;
    const float* up = gate + F;
    const float* d = dout + (size_t)n * F;
    float* dgate = dh13 + (size_t)n * 2 * F;
    float* dup = dgate + F;
#pragma omp simd
    for (int i = 0; i < F; i++) {
      const float sigmoid = 1.0f / (1.0f + exp_vectorizable(-gate[i]));
      const float silu = gate[i] * sigmoid;
      // d silu(g) / dg = sigmoid(g) * (1 + g * (1 - sigmoid(g)))
      dgate[i] = d[i] * up[i] * sigmoid * (1.0f + gate[i] * (1.0f - sigmoid));
      dup[i] = d[i] * silu;
    }
  }
}

}  // namespace llm::cpu
