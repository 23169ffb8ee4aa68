// Conversions between fp32 and bf16 buffers: the mixed-precision boundary
// (fp32 master weights -> bf16 compute copies, bf16 data -> fp32 scratch).
// Invariant: f32 -> bf16 rounds each element to nearest even (float_to_bf16);
// bf16 -> f32 is exact.
#pragma once

#include <cstddef>

#include "base/bf16.h"

namespace llm::cpu {

void cast_f32_to_bf16(Bf16* out, const float* in, size_t n);
void cast_bf16_to_f32(float* out, const Bf16* in, size_t n);

}  // namespace llm::cpu

// CUDA twins (cast.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void cast_f32_to_bf16(Bf16* out, const float* in, size_t n);
void cast_bf16_to_f32(float* out, const Bf16* in, size_t n);

}  // namespace llm::cuda
