// A vectorizable exp for the CPU kernels (attention, cross-entropy, SwiGLU):
// libm's expf is an opaque call that stops loops from vectorizing, and these
// kernels evaluate exp once per score, logit or activation.
// Invariant: within 2 ulp of exp(x) for x in [-87, 88]; 0 below, exp(88) above.
#pragma once

#include <bit>
#include <cstdint>

namespace llm::cpu {

// Cephes expf: x = k ln2 + r with |r| <= ln2 / 2, exp(r) by a degree-7
// polynomial, times 2^k built from its exponent bits. Plain arithmetic and
// selects only, so `#pragma omp simd` loops over it vectorize.
inline float exp_vectorizable(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 = hi + lo
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds
  constexpr float kMinArg = -87.0f;      // exp(-87) is near FLT_MIN: below, return 0
  constexpr float kMaxArg = 88.0f;       // exp(88) is near FLT_MAX: above, clamp
  const float xc = x < kMinArg ? kMinArg : (x > kMaxArg ? kMaxArg : x);
  const float k = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - k * kLn2Hi) - k * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float two_to_k = std::bit_cast<float>(((int32_t)k + 127) << 23);
  return x < kMinArg ? 0.0f : p * two_to_k;
}

}  // namespace llm::cpu
