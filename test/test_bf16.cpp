// core/bf16.h: exact widening, round-to-nearest-even narrowing (ties, just
// off the tie, overflow, denormals), inf and NaN, and a round trip of every
// bf16 bit pattern; plus random floats against a reference that picks the
// nearer neighbour in double precision.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "base/bf16.h"

namespace llm {
namespace {

uint16_t narrow(uint32_t float_bits) { return float_to_bf16(std::bit_cast<float>(float_bits)); }

TEST(Bf16, WideningIsExact) {
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xC000), -2.0f);
  EXPECT_EQ(bf16_to_float(0x3F81), 1.0f + 1.0f / 128);
  EXPECT_TRUE(std::signbit(bf16_to_float(0x8000)));
}

TEST(Bf16, TiesRoundToEven) {
  EXPECT_EQ(narrow(0x3F808000), 0x3F80);  // lsb 0 stays
  EXPECT_EQ(narrow(0x3F818000), 0x3F82);  // lsb 1 rounds up
  EXPECT_EQ(narrow(0xBF808000), 0xBF80);
  EXPECT_EQ(narrow(0xBF818000), 0xBF82);
}

TEST(Bf16, JustOffTheTieRoundsToNearest) {
  EXPECT_EQ(narrow(0x3F808001), 0x3F81);
  EXPECT_EQ(narrow(0x3F807FFF), 0x3F80);
  EXPECT_EQ(narrow(0x3F817FFF), 0x3F81);
  EXPECT_EQ(narrow(0xBF808001), 0xBF81);
  EXPECT_EQ(narrow(0x3F80FFFF), 0x3F81);
}

TEST(Bf16, CarryIntoTheExponent) {
  EXPECT_EQ(narrow(0x3FFF8000), 0x4000);  // 1.99609375.. rounds up to 2
}

TEST(Bf16, InfinitiesAndOverflow) {
  EXPECT_EQ(float_to_bf16(INFINITY), 0x7F80);
  EXPECT_EQ(float_to_bf16(-INFINITY), 0xFF80);
  EXPECT_EQ(narrow(0x7F7FFFFF), 0x7F80);  // max finite float is past bf16's max
  EXPECT_EQ(narrow(0xFF7FFFFF), 0xFF80);
  EXPECT_EQ(narrow(0x7F7F8000), 0x7F80);  // tie at bf16 max (odd) goes to inf
  EXPECT_EQ(narrow(0x7F7F7FFF), 0x7F7F);  // below the tie stays max finite
}

TEST(Bf16, NanStaysNan) {
  for (uint32_t bits :
       {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FBF0000u, 0x7FFFFFFFu}) {
    uint16_t narrowed = narrow(bits);
    EXPECT_TRUE(std::isnan(bf16_to_float(narrowed))) << std::hex << bits;
    EXPECT_TRUE(narrowed & 0x0040) << "quiet bit of " << std::hex << bits;
    EXPECT_EQ(narrowed >> 15, bits >> 31) << "sign of " << std::hex << bits;
  }
}

TEST(Bf16, Denormals) {
  EXPECT_EQ(narrow(0x00010000), 0x0001);  // smallest bf16 denormal, exact
  EXPECT_EQ(narrow(0x00008000), 0x0000);  // half of it: tie to even zero
  EXPECT_EQ(narrow(0x00018000), 0x0002);  // 1.5 of it: tie to even 2
  EXPECT_EQ(narrow(0x00008001), 0x0001);
  EXPECT_EQ(narrow(0x00000001), 0x0000);  // smallest float denormal
  EXPECT_EQ(narrow(0x80018000), 0x8002);
  EXPECT_EQ(narrow(0x007FFFFF), 0x0080);  // largest float denormal rounds to the smallest normal
}

TEST(Bf16, EveryPatternRoundTrips) {
  int mismatches = 0;
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    float value = bf16_to_float(static_cast<uint16_t>(bits));
    uint16_t back = float_to_bf16(value);
    bool ok = std::isnan(value) ? std::isnan(bf16_to_float(back)) : back == bits;
    mismatches += !ok;
  }
  EXPECT_EQ(mismatches, 0);
}

// The bf16 nearest to `value` (finite), choosing between the two neighbours
// in double precision; beyond the largest bf16 the next step is 2^128, as if
// the exponent were unbounded, which rounds to inf.
uint16_t reference_narrow(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint16_t toward_zero = static_cast<uint16_t>(bits >> 16), away = toward_zero + 1;
  auto magnitude = [](uint16_t b) {
    return (b & 0x7FFF) == 0x7F80 ? std::ldexp(1.0, 128) : std::fabs(double{bf16_to_float(b)});
  };
  double x = std::fabs(double{value});
  double below = x - magnitude(toward_zero), above = magnitude(away) - x;
  if (below < above) return toward_zero;
  if (above < below) return away;
  return (toward_zero & 1) ? away : toward_zero;
}

TEST(Bf16, RandomFloatsMatchTheReference) {
  std::mt19937 rng(12345);
  int mismatches = 0;
  for (int i = 0; i < 1000000; ++i) {
    uint32_t bits = rng();
    float value = std::bit_cast<float>(bits);
    if (!std::isfinite(value)) continue;
    mismatches += float_to_bf16(value) != reference_narrow(value);
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace llm
