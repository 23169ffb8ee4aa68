// fp32 <-> bf16 buffer conversions on the CPU. They are memory-bound, so the
// loops are both threaded and vectorized.
// Invariant: elementwise, so any slice converts to the same bits as the whole.
#include "model/kernels/cast.h"

namespace llm::cpu {

void cast_f32_to_bf16(Bf16* out, const float* in, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = to_bf16(in[i]);
}

void cast_bf16_to_f32(float* out, const Bf16* in, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = to_float(in[i]);
}

}  // namespace llm::cpu
