// Residual connection on the CPU: out = a + b elementwise, one template over
// the storage type (float or Bf16); the sum is fp32, rounded once on store.
// Invariant: each element is read before it is written, so out may alias a or b.
#include "model/kernels/residual.h"

namespace llm::cpu {

namespace {

template <class T>
void add_elementwise(T* out, const T* a, const T* b, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) store(out + i, to_float(a[i]) + to_float(b[i]));
}

}  // namespace

void residual_forward(float* out, const float* a, const float* b, size_t n) {
  add_elementwise(out, a, b, n);
}

void residual_forward_bf16(Bf16* out, const Bf16* a, const Bf16* b, size_t n) {
  add_elementwise(out, a, b, n);
}

}  // namespace llm::cpu
