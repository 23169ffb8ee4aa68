// A bias on every row on the CPU (see row_bias.h): forward parallel over
// rows, each row's heads rotated (cpu_rope_head.h) after its bias is stored;
// backward turns the heads back over rows first, then sums in parallel over
// blocks of 64 columns, each summing its rows in order, so its bits do not
// depend on the thread count. The rotation is rope.cpp's on the stored
// values, so the fused passes are bit for bit the compositions.
#include "model/kernels/row_bias.h"

#include <algorithm>
#include <cstddef>

#include "model/kernels/cpu_rope_head.h"

namespace llm::cpu {

namespace {

// Rotates the first rotated_heads heads of D of row n (of C values) by rope's
// angles for the row, with sine sign * sin.
template <class T>
void rotate_row_heads(T* x, int n, int C, int rotated_heads, int D, const RopeAngles& rope,
                      float sign) {
  const size_t angles = (size_t)rope_position(rope.positions, n, rope.T) * (D / 2);
  for (int h = 0; h < rotated_heads; h++)
    rope_rotate_head(x + (size_t)n * C + (size_t)h * D, rope.cos + angles, rope.sin + angles, sign,
                     D);
}

}  // namespace

template <class T>
void row_bias_forward(T* x, const T* bias, int N, int C, int rotated_heads, int D,
                      RopeAngles rope) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    T* row = x + (size_t)n * C;
#pragma omp simd
    for (int c = 0; c < C; c++) store(row + c, to_float(row[c]) + to_float(bias[c]));
    if (rope.cos) rotate_row_heads(x, n, C, rotated_heads, D, rope, 1.0f);
  }
}

template <class T>
void row_bias_backward(float* dbias, T* dout, int N, int C, int rotated_heads, int D,
                       RopeAngles rope) {
  if (rope.cos) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) rotate_row_heads(dout, n, C, rotated_heads, D, rope, -1.0f);
  }
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
