// The fp8 formats of base/fp8.h against an independent reference: the
// specification's landmark values, every code's value from the OCP formula
// evaluated in double, and encoding checked against a brute-force search for
// the nearest finite code (ties to the even code, beyond the largest value the
// largest) over all 256 codes, on every code's value, every midpoint between
// neighbours and the floats either side of it, and random floats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "base/fp8.h"

namespace llm {
namespace {

struct FormatCase {
  Fp8Format format;
  int exponent_bits, mantissa_bits, bias;
};
constexpr FormatCase kFormats[] = {{Fp8Format::e4m3, 4, 3, 7}, {Fp8Format::e5m2, 5, 2, 15}};

bool is_nan_code(uint8_t code, const FormatCase& f) {
  const int exponent = (code & 0x7f) >> f.mantissa_bits;
  const int mantissa = code & ((1 << f.mantissa_bits) - 1);
  if (f.format == Fp8Format::e4m3) return (code & 0x7f) == 0x7f;
  return exponent == 31 && mantissa != 0;
}
bool is_inf_code(uint8_t code, const FormatCase& f) {
  return f.format == Fp8Format::e5m2 && (code & 0x7f) == 0x7c;
}

// The OCP formula in double: (-1)^s 2^(e - bias) (1 + m / 2^M), subnormal
// 2^(1 - bias) (m / 2^M) at e = 0.
double reference_value(uint8_t code, const FormatCase& f) {
  const int exponent = (code & 0x7f) >> f.mantissa_bits;
  const double fraction = (code & ((1 << f.mantissa_bits) - 1)) / double(1 << f.mantissa_bits);
  const double magnitude = exponent == 0 ? std::pow(2.0, 1 - f.bias) * fraction
                                         : std::pow(2.0, exponent - f.bias) * (1.0 + fraction);
  return (code & 0x80) ? -magnitude : magnitude;
}

// The finite codes, each with its value.
std::vector<std::pair<uint8_t, double>> finite_codes(const FormatCase& f) {
  std::vector<std::pair<uint8_t, double>> codes;
  for (int c = 0; c < 256; c++)
    if (!is_nan_code(c, f) && !is_inf_code(c, f))
      codes.push_back({(uint8_t)c, reference_value(c, f)});
  return codes;
}

// The code nearest to x by brute force: ties go to the code whose mantissa's
// last bit is 0; x beyond the largest finite value goes to it (saturation).
// -0 and +0 both encode a zero of x's sign.
uint8_t reference_encode(float x, const FormatCase& f) {
  const auto codes = finite_codes(f);
  double largest = 0;
  for (const auto& [code, value] : codes) largest = std::max(largest, value);
  const double v = std::clamp<double>(x, -largest, largest);
  int best = -1;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const auto& [code, value] : codes) {
    if (value == 0 && std::signbit(value) != std::signbit(x)) continue;
    const double distance = std::fabs(value - v);
    if (distance < best_distance || (distance == best_distance && (code & 1) == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return (uint8_t)best;
}

TEST(Fp8Format, LandmarkValuesOfTheSpecification) {
  EXPECT_EQ(fp8_to_float(0x7e, Fp8Format::e4m3), 448.0f);
  EXPECT_EQ(fp8_to_float(0xfe, Fp8Format::e4m3), -448.0f);
  EXPECT_EQ(fp8_to_float(0x08, Fp8Format::e4m3), 0x1p-6f);    // smallest normal
  EXPECT_EQ(fp8_to_float(0x01, Fp8Format::e4m3), 0x1p-9f);    // smallest subnormal
  EXPECT_EQ(fp8_to_float(0x07, Fp8Format::e4m3), 0x1.cp-7f);  // largest subnormal, 0.875 * 2^-6
  EXPECT_EQ(fp8_to_float(0x78, Fp8Format::e4m3), 256.0f);
  EXPECT_EQ(fp8_to_float(0x38, Fp8Format::e4m3), 1.0f);
  EXPECT_TRUE(std::isnan(fp8_to_float(0x7f, Fp8Format::e4m3)));
  EXPECT_TRUE(std::isnan(fp8_to_float(0xff, Fp8Format::e4m3)));
  EXPECT_TRUE(std::signbit(fp8_to_float(0x80, Fp8Format::e4m3)));
  EXPECT_EQ(fp8_to_float(0x7b, Fp8Format::e5m2), 57344.0f);
  EXPECT_EQ(fp8_to_float(0x7c, Fp8Format::e5m2), INFINITY);
  EXPECT_EQ(fp8_to_float(0xfc, Fp8Format::e5m2), -INFINITY);
  for (uint8_t nan : {0x7d, 0x7e, 0x7f, 0xfd})
    EXPECT_TRUE(std::isnan(fp8_to_float(nan, Fp8Format::e5m2)));
  EXPECT_EQ(fp8_to_float(0x04, Fp8Format::e5m2), 0x1p-14f);
  EXPECT_EQ(fp8_to_float(0x01, Fp8Format::e5m2), 0x1p-16f);
  EXPECT_EQ(fp8_to_float(0x3c, Fp8Format::e5m2), 1.0f);
  for (const FormatCase& f : kFormats) {
    const Fp8Traits t = fp8_traits(f.format);
    EXPECT_EQ(fp8_to_float(t.max_code, f.format), t.max_value);
    EXPECT_TRUE(std::isnan(fp8_to_float(t.nan_code, f.format)));
  }
}

TEST(Fp8Format, EveryCodeDecodesToTheFormula) {
  for (const FormatCase& f : kFormats)
    for (int c = 0; c < 256; c++) {
      const float value = fp8_to_float(c, f.format);
      if (is_nan_code(c, f)) {
        EXPECT_TRUE(std::isnan(value)) << c;
      } else if (is_inf_code(c, f)) {
        EXPECT_EQ(value, (c & 0x80) ? -INFINITY : INFINITY) << c;
      } else {
        EXPECT_EQ((double)value, reference_value(c, f)) << c;
        EXPECT_EQ(std::signbit(value), (c & 0x80) != 0) << c;
      }
    }
}

void expect_encodes_like_reference(float x, const FormatCase& f) {
  const uint8_t got = float_to_fp8(x, f.format), want = reference_encode(x, f);
  ASSERT_EQ(got, want) << "x = " << x << " (" << std::hexfloat << x << std::defaultfloat
                       << "), format e" << f.exponent_bits << "m" << f.mantissa_bits;
}

TEST(Fp8Format, EncodingPicksTheNearestTiesToEvenAndSaturates) {
  std::mt19937 rng(20261126);
  for (const FormatCase& f : kFormats) {
    auto codes = finite_codes(f);
    std::vector<double> positives;
    for (const auto& [code, value] : codes)
      if (!(code & 0x80)) positives.push_back(value);
    std::sort(positives.begin(), positives.end());
    // The next value the format would have above its largest: the midpoint
    // with it is where a non-saturating encoder would stop.
    const double largest = positives.back(), gap = largest - positives[positives.size() - 2];
    positives.push_back(largest + gap);
    std::vector<float> inputs = {0.0f,  -0.0f,    1e-30f,    1e-45f,
                                 1e30f, INFINITY, -INFINITY, std::numeric_limits<float>::max()};
    for (size_t i = 0; i + 1 < positives.size(); i++) {
      const float midpoint = (float)((positives[i] + positives[i + 1]) / 2);  // exact in fp32
      for (float x : {(float)positives[i], midpoint, std::nextafter(midpoint, 0.0f),
                      std::nextafter(midpoint, INFINITY)})
        inputs.push_back(x);
    }
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    for (int i = 0; i < 20000; i++)  // log-uniform over the format's range and past it
      inputs.push_back(std::ldexp(1.0f + unit(rng), (int)(unit(rng) * 40) - 22));
    for (float x : inputs) {
      expect_encodes_like_reference(x, f);
      expect_encodes_like_reference(-x, f);
    }
  }
}

TEST(Fp8Format, NanStaysNanAndInfinitySaturates) {
  for (const FormatCase& f : kFormats) {
    const Fp8Traits t = fp8_traits(f.format);
    EXPECT_EQ(float_to_fp8(NAN, f.format), t.nan_code);
    EXPECT_EQ(float_to_fp8(-NAN, f.format), t.nan_code);  // canonical, as CUDA's
    EXPECT_EQ(float_to_fp8(INFINITY, f.format), t.max_code);
    EXPECT_EQ(float_to_fp8(-INFINITY, f.format), 0x80 | t.max_code);
  }
}

// The scale 2^k and its inverse against an independent search: k is the
// largest integer with amax 2^k <= the largest value (ilogb/ldexp in double),
// clamped to the limit.
int reference_scale_exponent(float amax, Fp8Format format) {
  const double max_value = fp8_traits(format).max_value;
  int k = std::ilogb(max_value) - std::ilogb((double)amax) + 1;
  while (std::ldexp((double)amax, k) > max_value) k--;
  return std::clamp(k, -kFp8ScaleExponentLimit, kFp8ScaleExponentLimit);
}

TEST(Fp8Format, ScaleFillsTheTopBinadeWithoutSaturating) {
  for (const FormatCase& f : kFormats) {
    for (float amax : {1.0f, 0.3f, 447.0f, 448.0f, 449.0f, 57344.0f, 1e-15f, 1e20f, 1e-30f, 1e-40f,
                       3e38f, 0x1p-9f}) {
      const Fp8Scale s = fp8_scale_from_amax(amax, f.format);
      const int k = reference_scale_exponent(amax, f.format);
      EXPECT_EQ(s.amax, amax);
      EXPECT_EQ(s.scale, std::ldexp(1.0f, k)) << amax;
      EXPECT_EQ(s.inverse, std::ldexp(1.0f, -k)) << amax;
    }
    for (float amax : {0.0f, NAN, INFINITY}) {
      const Fp8Scale s = fp8_scale_from_amax(amax, f.format);
      EXPECT_EQ(s.scale, 1.0f);
      EXPECT_EQ(s.inverse, 1.0f);
    }
  }
  // Landmarks: 256 <= 448 < 512, 32768 <= 57344 < 65536; beyond the limit
  // tiny tensors use less of the range and one above 448 * 2^60 saturates.
  EXPECT_EQ(fp8_scale_from_amax(1.0f, Fp8Format::e4m3).scale, 256.0f);
  EXPECT_EQ(fp8_scale_from_amax(1.0f, Fp8Format::e5m2).scale, 32768.0f);
  EXPECT_EQ(fp8_scale_from_amax(1e-30f, Fp8Format::e4m3).scale, 0x1p60f);
  EXPECT_EQ(fp8_scale_from_amax(3e38f, Fp8Format::e4m3).scale, 0x1p-60f);
}

}  // namespace
}  // namespace llm
