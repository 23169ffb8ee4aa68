// The device side of base/fp8.h's amax as integer maxima of magnitude
// bits, shared by the FP8 casts' amax pass (fp8_matmul.cu) and the kernels
// that write each output row's amax beside the row (rmsnorm.cu, swiglu.cu),
// so that every path gives the same float for the same values; and the
// scaled cast to a code that the casts and the producers writing codes
// (rmsnorm_forward_fp8, swiglu_forward_fp8) share.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "base/fp8.h"
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

// The value `value` has as T stores it (bf16: rounded as store_f32 rounds).
template <class T>
__device__ __forceinline__ float stored_value(float value) {
  T stored;
  store_f32(&stored, value);
  return load_f32(&stored);
}

// The code of x * scale in `format` (cvt.rn.satfinite: base/fp8.h's rounding).
__device__ __forceinline__ uint8_t fp8_code(float x, float scale, Fp8Format format) {
  return __nv_cvt_float_to_fp8(x * scale, __NV_SATFINITE,
                               format == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2);
}

// *amax = the float of the largest `largest` of the block's threads (a row's
// amax, or a partial of the amax pass); every thread of the block calls it.
__device__ __forceinline__ void write_block_amax(float* amax, uint32_t largest) {
  largest = block_reduce(largest, 0u, MaxBits{});
  if (threadIdx.x == 0) *amax = __uint_as_float(largest);
}

}  // namespace llm::cuda
