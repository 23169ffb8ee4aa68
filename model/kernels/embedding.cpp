// Token embedding lookup and its gradient on the CPU, one template over the
// storage type (float or Bf16) of the embedding rows and their gradient.
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

}  // namespace

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    std::memcpy(out + (size_t)n * C, wte + (size_t)tokens[n] * C, sizeof(T) * C);
  }
}

template <class T>
void embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C) {
  const int n_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int block = 0; block < n_blocks; block++) {
    const int c0 = block * kColumnBlock;
    const int width = std::min(kColumnBlock, C - c0);
    for (int n = 0; n < N; n++) {
      float* dst = dwte + (size_t)tokens[n] * C + c0;
      const T* src = dout + (size_t)n * C + c0;
#pragma omp simd
      for (int c = 0; c < width; c++) dst[c] += to_float(src[c]);
    }
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(embedding_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(embedding_backward);

}  // namespace llm::cpu
