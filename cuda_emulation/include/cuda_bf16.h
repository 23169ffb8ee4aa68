// __nv_bfloat16 and the conversions the kernels use, under emulation.
// Invariant: __float2bfloat16_rn rounds to nearest, ties to even, and turns
// every NaN into the canonical NaN (0x7FFF), as CUDA's does.
#pragma once

#include <bit>
#include <cstdint>

struct __nv_bfloat16 {
  unsigned short __x;
};

inline float __bfloat162float(__nv_bfloat16 value) {
  return std::bit_cast<float>(uint32_t{value.__x} << 16);
}

inline __nv_bfloat16 __float2bfloat16_rn(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return {0x7FFF};
  const uint32_t lsb = (bits >> 16) & 1u;
  return {static_cast<unsigned short>((bits + 0x7FFFu + lsb) >> 16)};
}

inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) { return {bits}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 value) { return value.__x; }
