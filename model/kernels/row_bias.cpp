// A bias on every row on the CPU (see row_bias.h): forward parallel over
// rows; backward parallel over blocks of 64 columns, each summing its rows
// in order, so its bits do not depend on the thread count.
#include "model/kernels/row_bias.h"

#include <algorithm>
#include <cstddef>

namespace llm::cpu {

template <class T>
void row_bias_forward(T* x, const T* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    T* row = x + (size_t)n * C;
#pragma omp simd
    for (int c = 0; c < C; c++) store(row + c, to_float(row[c]) + to_float(bias[c]));
  }
}

template <class T>
void row_bias_backward(float* dbias, const T* dout, int N, int C) {
  constexpr int kColumnBlock = 64;
  const int n_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int block = 0; block < n_blocks; block++) {
    const int c0 = block * kColumnBlock;
    const int width = std::min(kColumnBlock, C - c0);
    float acc[kColumnBlock] = {};
    for (int n = 0; n < N; n++) {
      const T* row = dout + (size_t)n * C + c0;
#pragma omp simd
      for (int c = 0; c < width; c++) acc[c] += to_float(row[c]);
    }
    for (int c = 0; c < width; c++) dbias[c0 + c] += acc[c];
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(row_bias_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(row_bias_backward);

}  // namespace llm::cpu
