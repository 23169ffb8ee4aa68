// Token embedding lookup and its gradient, for fp32 or bf16 (`_bf16`) storage.
// Invariant: backward is deterministic (each row of dwte sums its tokens in
// token order, whatever the thread count), so gradients are reproducible bits;
// dwte is fp32 in both precisions.
#pragma once

#include <cstdint>

#include "runtime/bf16.h"

namespace llm::cpu {

// out (N, C) = wte (V, C) row tokens[n]; every token must lie in [0, V).
void embedding_forward(float* out, const int32_t* tokens, const float* wte, int N, int C);
void embedding_forward_bf16(Bf16* out, const int32_t* tokens, const Bf16* wte, int N, int C);

// dwte (V, C) += sum over positions n with tokens[n] == v of dout[n] (N, C).
void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int N, int C);
void embedding_backward_bf16(float* dwte, const Bf16* dout, const int32_t* tokens, int N, int C);

}  // namespace llm::cpu

// CUDA twins (embedding.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void embedding_forward(float* out, const int32_t* tokens, const float* wte, int N, int C);
void embedding_forward_bf16(Bf16* out, const int32_t* tokens, const Bf16* wte, int N, int C);
void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int N, int C);
void embedding_backward_bf16(float* dwte, const Bf16* dout, const int32_t* tokens, int N, int C);

}  // namespace llm::cuda
