// Elementwise vector sum on the CPU (add_vectors: the gradient-shard
// accumulator): out = a + b, one template over the storage
// type (float or Bf16); the sum is fp32, rounded once on store.
// Invariant: each element is read before it is written, so out may alias a or b.
#include "model/kernels/residual.h"

namespace llm::cpu {

template <class T>
void add_vectors(T* out, const T* a, const T* b, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) store(out + i, to_float(a[i]) + to_float(b[i]));
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(add_vectors);

}  // namespace llm::cpu
