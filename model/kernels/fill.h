// Buffer fill: sets n elements (fp32 or bf16) to +0, the start of an accumulation.
#pragma once

#include <cstddef>

#include "runtime/bf16.h"

namespace llm::cpu {

void fill_zero(float* x, size_t n);
void fill_zero_bf16(Bf16* x, size_t n);

}  // namespace llm::cpu

// CUDA twins (fill.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void fill_zero(float* x, size_t n);
void fill_zero_bf16(Bf16* x, size_t n);

}  // namespace llm::cuda
