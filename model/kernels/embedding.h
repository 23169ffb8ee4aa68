// Token embedding lookup and its gradient, for storage type T (float or Bf16).
// Invariant: backward is deterministic (each row of dwte sums its tokens in
// token order, whatever the thread count), so gradients are reproducible bits;
// dwte is fp32 in both precisions.
#pragma once

#include <cstdint>

#include "runtime/storage_types.h"

namespace llm::cpu {

// out (N, C) = wte (V, C) row tokens[n]; every token must lie in [0, V).
template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C);

// dwte (V, C) += sum over positions n with tokens[n] == v of dout[n] (N, C).
template <class T>
void embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C);

}  // namespace llm::cpu

// CUDA twins (embedding.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C);
template <class T>
void embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int N, int C);

}  // namespace llm::cuda
