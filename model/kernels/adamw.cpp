// AdamW (with the optional bf16 copy of the updated params) and the gradient
// squared-norm on the CPU.
// Invariant: both are elementwise over [0, n) so a shard gets the same bits as
// the whole; the bf16 copy is to_bf16, as in cast_f32_to_bf16; sum_squares
// adds fixed-size chunks, each in double in the order of cpu_lane_sum.h, in
// chunk order, so its result depends on neither the thread count nor the CPU.
#include "model/kernels/adamw.h"

#include "model/kernels/cpu_lane_sum.h"
#include <cmath>
#include <vector>

namespace llm::cpu {

namespace {
constexpr size_t kSumChunk = 1 << 14;  // floats per partial sum of sum_squares
}

void adamw_update(float* params, Bf16* params_bf16, const float* grads, float* m, float* v,
                  size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                  float grad_scale, int t) {
  const float bias_correction1 = (float)(1.0 - std::pow((double)beta1, t));
  const float bias_correction2 = (float)(1.0 - std::pow((double)beta2, t));
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) {
    const float g = grads[i] * grad_scale;
    const float m_i = beta1 * m[i] + (1.0f - beta1) * g;
    const float v_i = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = m_i;
    v[i] = v_i;
    const float m_hat = m_i / bias_correction1;
    const float v_hat = v_i / bias_correction2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * params[i]);
    if (params_bf16 != nullptr) params_bf16[i] = to_bf16(params[i]);
  }
}

void sum_squares(double* result, const float* x, size_t n) {
  const size_t n_chunks = (n + kSumChunk - 1) / kSumChunk;
  std::vector<double> partial(n_chunks);
#pragma omp parallel for schedule(static)
  for (size_t chunk = 0; chunk < n_chunks; chunk++) {
    const size_t begin = chunk * kSumChunk;
    const size_t end = begin + kSumChunk < n ? begin + kSumChunk : n;
    partial[chunk] = lane_sum<double>((int)(end - begin),
                                      [&](int i) { return (double)x[begin + i] * x[begin + i]; });
  }
  double total = 0.0;
  for (double p : partial) total += p;
  *result = total;
}

}  // namespace llm::cpu
