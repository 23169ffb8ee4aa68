// Token embedding lookup and its gradient on the CPU, one template over the
// storage type (float or Bf16) of the embedding rows and their gradient, over
// the vocabulary slice [vocab_begin, vocab_begin + vocab_rows) that wte holds.
// Invariant: backward splits the work over column blocks of dwte and visits
// tokens in order inside each block, so every dwte element sums its
// contributions (in fp32) in token order whatever the thread count.
#include "model/kernels/embedding.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace llm::cpu {

namespace {

constexpr int kColumnBlock = 64;  // columns per work item of the backward pass

// The row of the slice that holds `token`, or -1 when the slice does not.
inline int slice_row(int32_t token, int vocab_begin, int vocab_rows) {
  const int64_t row = (int64_t)token - vocab_begin;
  return row >= 0 && row < vocab_rows ? (int)row : -1;
}

}  // namespace

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C, int vocab_begin,
                       int vocab_rows) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const int row = slice_row(tokens[n], vocab_begin, vocab_rows);
    T* dst = out + (size_t)n * C;
    if (row < 0)
      std::memset(dst, 0, sizeof(T) * C);  // all-zero bits: +0 in fp32 and bf16
    else
      std::memcpy(dst, wte + (size_t)row * C, sizeof(T) * C);
  }
}

template <class T>
void embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C,
                        int vocab_begin, int vocab_rows) {
  const int n_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int block = 0; block < n_blocks; block++) {
    const int c0 = block * kColumnBlock;
    const int width = std::min(kColumnBlock, C - c0);
    for (int n = 0; n < N; n++) {
      const int row = slice_row(tokens[n], vocab_begin, vocab_rows);
      if (row < 0) continue;
      float* dst = dwte + (size_t)row * C + c0;
      const T* src = dout + (size_t)n * C + c0;
#pragma omp simd
      for (int c = 0; c < width; c++) dst[c] += to_float(src[c]);
    }
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(embedding_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(embedding_backward);

}  // namespace llm::cpu
