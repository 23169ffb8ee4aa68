// RMSNorm on the CPU: y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps),
// one template over the storage type (float or Bf16) of x, y, weight and their
// gradients; all math is fp32 (the sum of squares double), rounded once on store.
// Invariant: dweight is summed over rows in row order inside fixed column
// blocks, so its bits do not depend on the thread count; dinp and dweight
// accumulate (+=).
#include "model/kernels/rmsnorm.h"

#include "model/kernels/cpu_lane_sum.h"
#include <algorithm>
#include <cmath>
#include <cstddef>

namespace llm::cpu {

namespace {

constexpr int kColumnBlock = 64;  // dweight columns per work item of the backward pass

}  // namespace

template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* x = inp + (size_t)n * C;
    T* y = out + (size_t)n * C;
    const double sum_sq =
        lane_sum<double>(C, [&](int c) { return (double)to_float(x[c]) * to_float(x[c]); });
    const float s = (float)(1.0 / std::sqrt(sum_sq / C + eps));
#pragma omp simd
    for (int c = 0; c < C; c++) store(y + c, to_float(x[c]) * s * to_float(weight[c]));
    rstd[n] = s;
  }
}

template <class T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                      const float* rstd, int N, int C) {
  // dinp = rstd * (w * dy - xhat * mean(w * dy * xhat)), with xhat = x * rstd.
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* x = inp + (size_t)n * C;
    const T* dy = dout + (size_t)n * C;
    T* dx = dinp + (size_t)n * C;
    const float s = rstd[n];
    const float dot = lane_sum<float>(  // sum_c w * dy * x
        C, [&](int c) { return to_float(weight[c]) * to_float(dy[c]) * to_float(x[c]); });
    const float coeff = dot * s * s / C;
#pragma omp simd
    for (int c = 0; c < C; c++) {
      const float grad = s * (to_float(weight[c]) * to_float(dy[c]) - to_float(x[c]) * coeff);
      store(dx + c, to_float(dx[c]) + grad);
    }
  }

  // dweight[c] += sum_n dy[n][c] * x[n][c] * rstd[n], rows in order.
  const int n_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int block = 0; block < n_blocks; block++) {
    const int c0 = block * kColumnBlock;
    const int width = std::min(kColumnBlock, C - c0);
    float acc[kColumnBlock] = {};
    for (int n = 0; n < N; n++) {
      const T* x = inp + (size_t)n * C + c0;
      const T* dy = dout + (size_t)n * C + c0;
      const float s = rstd[n];
#pragma omp simd
      for (int c = 0; c < width; c++) acc[c] += to_float(dy[c]) * to_float(x[c]) * s;
    }
    for (int c = 0; c < width; c++) dweight[c0 + c] += acc[c];
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(rmsnorm_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(rmsnorm_backward);

}  // namespace llm::cpu
