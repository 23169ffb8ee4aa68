// Token embedding lookup and its gradient on the CPU.
// Invariant: backward splits the work over column blocks of dwte and visits
// tokens in order inside each block, so every dwte element sums its
// contributions in token order whatever the thread count.
#include "model/kernels/embedding.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace llm::cpu {

namespace {
constexpr int kColumnBlock = 64;  // floats per work item of the backward pass
}

void embedding_forward(float* out, const int32_t* tokens, const float* wte, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    std::memcpy(out + (size_t)n * C, wte + (size_t)tokens[n] * C, sizeof(float) * C);
  }
}

void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int N, int C) {
  const int n_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int block = 0; block < n_blocks; block++) {
    const int c0 = block * kColumnBlock;
    const int width = std::min(kColumnBlock, C - c0);
    for (int n = 0; n < N; n++) {
      float* dst = dwte + (size_t)tokens[n] * C + c0;
      const float* src = dout + (size_t)n * C + c0;
#pragma omp simd
      for (int c = 0; c < width; c++) dst[c] += src[c];
    }
  }
}

}  // namespace llm::cpu
