// bfloat16 storage: the top 16 bits of an IEEE-754 float (sign, 8-bit
// exponent, 7-bit mantissa). Math is done in fp32; values are stored back with
// round-to-nearest-even.
// Invariants: bf16_to_float is exact; float_to_bf16 rounds to nearest, ties to
// even, overflows to +/-inf, keeps inf as inf and NaN as a (quiet) NaN.
// Bf16 is the storage type of bf16 tensors (distinct from uint16_t tokens, so
// overloads and op tables are type-checked); to_float / store let one kernel
// template read and write float or Bf16 storage with fp32 math in between.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace llm {

inline float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

inline uint16_t float_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  // Rounding a NaN whose payload lies only in the low 16 bits would give inf:
  // truncate instead and set the quiet bit, so NaN stays NaN.
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7FFF (+1 when the kept lsb is odd) carries into the kept bits
  // exactly when the dropped half is above the tie, or at the tie with an odd
  // lsb. A carry out of the mantissa bumps the exponent, which is also right
  // (and turns the largest floats into inf).
  uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7FFFu + lsb) >> 16);
}

struct Bf16 {
  uint16_t bits;
};
static_assert(sizeof(Bf16) == 2 && std::is_trivial_v<Bf16>);

inline float to_float(Bf16 x) { return bf16_to_float(x.bits); }
inline float to_float(float x) { return x; }
inline Bf16 to_bf16(float x) { return Bf16{float_to_bf16(x)}; }

// *dst = value in dst's storage type: float as is, Bf16 rounded to nearest even.
inline void store(float* dst, float value) { *dst = value; }
inline void store(Bf16* dst, float value) { *dst = to_bf16(value); }

}  // namespace llm
