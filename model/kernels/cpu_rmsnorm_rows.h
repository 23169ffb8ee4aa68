// RMSNorm's per-row math on the CPU, shared by rmsnorm.cpp (rows of C) and
// qk_norm.cpp (heads of D inside wider rows): one row's forward, one row's
// input gradient, and the gain gradient summed over a sequence of rows.
// Invariant: the sum of squares is double, all else fp32, rounded once on
// store; every sum has a fixed order (lane_sum; the gain gradient sums rows
// in the order given, inside fixed column blocks), so the bits do not depend
// on the thread count.
#pragma once

#include <algorithm>
#include <cmath>

#include "model/kernels/cpu_lane_sum.h"
#include "base/bf16.h"

namespace llm::cpu {

// y = x * s * w over C values; returns s = 1 / sqrt(mean(x^2) + eps).
template <class T>
inline float rmsnorm_row_forward(T* y, const T* x, const T* w, int C, float eps) {
  const double sum_sq =
      lane_sum<double>(C, [&](int c) { return (double)to_float(x[c]) * to_float(x[c]); });
  const float s = (float)(1.0 / std::sqrt(sum_sq / C + eps));
#pragma omp simd
  for (int c = 0; c < C; c++) store(y + c, to_float(x[c]) * s * to_float(w[c]));
  return s;
}

// The row's input gradient g = s * (w * dy - xhat * mean(w * dy * xhat)),
// xhat = x * s, into dx: dx + g rounded once when kAccumulate, g otherwise.
template <bool kAccumulate, class T>
inline void rmsnorm_row_backward(T* dx, const T* dy, const T* x, const T* w, float s, int C) {
  const float dot = lane_sum<float>(  // sum_c w * dy * x
      C, [&](int c) { return to_float(w[c]) * to_float(dy[c]) * to_float(x[c]); });
  const float coeff = dot * s * s / C;
#pragma omp simd
  for (int c = 0; c < C; c++) {
    const float grad = s * (to_float(w[c]) * to_float(dy[c]) - to_float(x[c]) * coeff);
    if constexpr (kAccumulate)
      store(dx + c, to_float(dx[c]) + grad);
    else
      store(dx + c, grad);
  }
}

// One row of a norm's backward as the gain gradient reads it.
template <class T>
struct NormRow {
  const T* x;   // the forward's input (C)
  const T* dy;  // d(loss)/d(out) (C)
  float s;      // the forward's rstd
};

// dweight[c] += sum over rows r in [0, rows), in order, of dy[c] * x[c] * s,
// with {x, dy, s} = row_at(r). Parallel over blocks of 64 columns.
template <class T, class RowAt>
void accumulate_gain_gradient(float* dweight, int rows, int C, RowAt row_at) {
  constexpr int kColumnBlock = 64;
  const int n_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int block = 0; block < n_blocks; block++) {
    const int c0 = block * kColumnBlock;
    const int width = std::min(kColumnBlock, C - c0);
    float acc[kColumnBlock] = {};
    for (int r = 0; r < rows; r++) {
      const NormRow<T> row = row_at(r);
      const T* x = row.x + c0;
      const T* dy = row.dy + c0;
#pragma omp simd
      for (int c = 0; c < width; c++) acc[c] += to_float(dy[c]) * to_float(x[c]) * row.s;
    }
    for (int c = 0; c < width; c++) dweight[c0 + c] += acc[c];
  }
}

}  // namespace llm::cpu
