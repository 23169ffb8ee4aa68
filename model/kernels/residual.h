// Residual connection: out = a + b elementwise (out may alias a or b), in fp32
// or bf16 storage (`_bf16`: the sum is taken in fp32 and rounded once).
// Its backward is the identity, so it has no backward kernel.
#pragma once

#include <cstddef>

#include "runtime/bf16.h"

namespace llm::cpu {

void residual_forward(float* out, const float* a, const float* b, size_t n);
void residual_forward_bf16(Bf16* out, const Bf16* a, const Bf16* b, size_t n);

}  // namespace llm::cpu

// CUDA twins (residual.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void residual_forward(float* out, const float* a, const float* b, size_t n);
void residual_forward_bf16(Bf16* out, const Bf16* a, const Bf16* b, size_t n);

}  // namespace llm::cuda
