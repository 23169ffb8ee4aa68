// bfloat16 storage: the top 16 bits of an IEEE-754 float (sign, 8-bit
// exponent, 7-bit mantissa). Math is done in fp32; values are stored back with
// round-to-nearest-even.
// Invariants: bf16_to_float is exact; float_to_bf16 rounds to nearest, ties to
// even, overflows to +/-inf, keeps inf as inf and NaN as a (quiet) NaN.
#pragma once

#include <bit>
#include <cstdint>

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

}  // namespace llm
