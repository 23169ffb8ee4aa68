// Residual connection on the CPU: out = a + b elementwise.
// Invariant: each element is read before it is written, so out may alias a or b.
#include "model/kernels/residual.h"

namespace llm::cpu {

void residual_forward(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

}  // namespace llm::cpu
