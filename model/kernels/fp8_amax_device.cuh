// The device side of base/fp8.h's amax as integer maxima of magnitude
// bits, shared by the FP8 casts' amax pass (fp8_matmul.cu) and the kernels
// that write each output row's amax beside the row (rmsnorm.cu, swiglu.cu),
// so that every path gives the same float for the same values.
#pragma once

#include <cstdint>

#include "device/cuda_kernel_helpers.cuh"

namespace llm::cuda {

struct MaxBits {
  __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const {
    return a > b ? a : b;
  }
};

// fp8_magnitude_bits (base/fp8.h) on the device.
__device__ __forceinline__ uint32_t magnitude_bits(float x) {
  return __float_as_uint(x) & 0x7fffffffu;
}
__device__ __forceinline__ uint32_t magnitude_bits(Bf16 x) {
  return static_cast<uint32_t>(x.bits & 0x7fffu) << 16;
}

// The magnitude bits of `value` as T stores it (bf16: rounded as store_f32 rounds).
template <class T>
__device__ __forceinline__ uint32_t stored_magnitude_bits(float value) {
  T stored;
  store_f32(&stored, value);
  return magnitude_bits(stored);
}

// *amax = the float of the largest `largest` of the block's threads (a row's
// amax, or a partial of the amax pass); every thread of the block calls it.
__device__ __forceinline__ void write_block_amax(float* amax, uint32_t largest) {
  largest = block_reduce(largest, 0u, MaxBits{});
  if (threadIdx.x == 0) *amax = __uint_as_float(largest);
}

}  // namespace llm::cuda
