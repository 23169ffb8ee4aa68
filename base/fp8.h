// The two 8-bit float formats of the OCP 8-bit floating point specification
// (v1.0), as Hopper's tensor cores take them:
//   e4m3 (E4M3FN): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no
//        infinities, NaN only at S.1111.111 (0x7f, 0xff); largest 448;
//   e5m2: 1 sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like:
//        exponent 31 holds +-inf (mantissa 0) and NaN; largest finite 57344.
// Encoding rounds to nearest, ties to even, and saturates: a finite value
// beyond the largest (and an infinity) becomes +-largest, as the
// specification's saturating conversion and CUDA's __NV_SATFINITE do; a NaN
// of either sign becomes the canonical NaN 0x7f, as CUDA's
// __nv_cvt_float_to_fp8 makes it. Decoding is exact in fp32. (Checked once,
// 2026-11-26, against CUDA 13.0's host __nv_cvt_float_to_fp8 on every 64th
// float, both formats: the same bits for all of them.)
// The per-tensor scale of a quantized tensor is a power of two
// (fp8_scale_from_amax), so scaling and unscaling are exact: the fp8 value is
// the format's rounding of x * 2^k and its value divided by 2^k is exact.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "base/bf16.h"

// Host and device: the scale is computed by the CUDA kernels too.
#ifdef __CUDACC__
#define LLM_FP8_HOST_DEVICE __host__ __device__
#else
#define LLM_FP8_HOST_DEVICE
#endif

namespace llm {

enum class Fp8Format { e4m3, e5m2 };

// The constants of a format.
struct Fp8Traits {
  int mantissa_bits;
  int bias;
  uint8_t max_code;  // the largest finite magnitude's bits (sign clear)
  uint8_t nan_code;  // the NaN this encoder writes: 0x7f in both
  float max_value;
};

LLM_FP8_HOST_DEVICE inline constexpr Fp8Traits fp8_traits(Fp8Format format) {
  return format == Fp8Format::e4m3 ? Fp8Traits{3, 7, 0x7e, 0x7f, 448.0f}
                                   : Fp8Traits{2, 15, 0x7b, 0x7f, 57344.0f};
}

// The value of an fp8 code (exact; NaN codes give NaN, e5m2's infinities inf).
inline float fp8_to_float(uint8_t code, Fp8Format format) {
  const Fp8Traits f = fp8_traits(format);
  const int m = f.mantissa_bits;
  const int exponent = (code & 0x7f) >> m, mantissa = code & ((1 << m) - 1);
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  const int top_exponent = (1 << (7 - m)) - 1;
  if (format == Fp8Format::e4m3 && (code & 0x7f) == 0x7f) return NAN;
  if (format == Fp8Format::e5m2 && exponent == top_exponent)
    return mantissa == 0 ? sign * INFINITY : NAN;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), 1 - f.bias - m);
  return sign * std::ldexp(static_cast<float>((1 << m) + mantissa), exponent - f.bias - m);
}

// x rounded to the nearest fp8 value, ties to even, saturating (see above).
inline uint8_t float_to_fp8(float x, Fp8Format format) {
  const Fp8Traits f = fp8_traits(format);
  const int m = f.mantissa_bits;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return f.nan_code;
  const float a = std::bit_cast<float>(magnitude);
  if (a >= f.max_value) return sign | f.max_code;  // infinities included
  if (a < std::ldexp(1.0f, 1 - f.bias)) {
    // Below the smallest normal: a multiple of the subnormal quantum
    // 2^(1 - bias - m). a / quantum is exact and below 2^m; rounding it to an
    // integer gives the code directly (2^m is the smallest normal's code).
    const float q = std::ldexp(a, f.bias - 1 + m);
    uint32_t whole = static_cast<uint32_t>(q);
    const float rest = q - static_cast<float>(whole);
    if (rest > 0.5f || (rest == 0.5f && (whole & 1u))) whole++;
    return sign | static_cast<uint8_t>(whole);
  }
  // A normal result: round fp32's 23 mantissa bits to m, ties to even (a
  // carry into the exponent is right), then move the exponent from fp32's
  // bias 127 to the format's. No result passes max_code, as a < max_value.
  const int drop = 23 - m;
  const uint32_t lsb = (magnitude >> drop) & 1u;
  const uint32_t rounded = (magnitude + (1u << (drop - 1)) - 1u + lsb) >> drop;
  return sign | static_cast<uint8_t>(rounded - (static_cast<uint32_t>(127 - f.bias) << m));
}

// The per-tensor scale of a tensor whose largest magnitude is amax: 2^k with
// the largest k for which amax * 2^k <= the format's largest value, so the
// tensor uses the top binade without saturating. k is kept within
// +-kFp8ScaleExponentLimit, so that the product of two tensors' inverse
// scales, 2^-(k1 + k2), is a normal float (a GEMM multiplies its sum by it);
// amax 0 or not finite (a NaN or inf in the tensor, which the loss then
// shows) gives k = 0. Plain arithmetic (doublings and halvings, all exact), so
// the CUDA kernels compute the same scale on the device.
inline constexpr int kFp8ScaleExponentLimit = 60;

// cuBLASLt reads `inverse` through a scale pointer, which Hopper's FP8 GEMMs
// need 16-byte aligned: on an H200 (cuBLASLt 13.1, 2026-11-27) a scale 8
// bytes into this struct made every FP8 GEMM fail with NOT_SUPPORTED, though
// the heuristic had taken it (tools/gpu_kit/probe_fp8_gemm.cu).
struct Fp8Scale {
  float amax;                 // the tensor's largest magnitude
  float scale;                // 2^k: codes are fp8(x * scale)
  alignas(16) float inverse;  // 2^-k: a code's value times this is the dequantized value
};

LLM_FP8_HOST_DEVICE inline Fp8Scale fp8_scale_from_amax(float amax, Fp8Format format) {
  Fp8Scale s{amax, 1.0f, 1.0f};
  if (!(amax > 0.0f) || !(amax <= 3.4028235e38f)) return s;  // 0, NaN or inf
  const float max_value = fp8_traits(format).max_value;
  float v = amax;
  for (int k = 0; k < kFp8ScaleExponentLimit && v * 2.0f <= max_value; k++) {
    v *= 2.0f;
    s.scale *= 2.0f;
    s.inverse *= 0.5f;
  }
  for (int k = 0; k < kFp8ScaleExponentLimit && v > max_value; k++) {
    v *= 0.5f;
    s.scale *= 0.5f;
    s.inverse *= 2.0f;
  }
  return s;
}

// codes[i] = float_to_fp8(x[i] * scale) for x's n values (as stored): a
// scaled cast, the CPU twins' one expression of it.
template <class T>
void fp8_encode_row(uint8_t* codes, const T* x, size_t n, float scale, Fp8Format format) {
  for (size_t i = 0; i < n; i++) codes[i] = float_to_fp8(to_float(x[i]) * scale, format);
}

// An amax as integer maxima: a value's magnitude as the bits of a float (a
// bf16's widened exactly), so the largest bits are the largest magnitude in
// any order, and a NaN's, above every number's, make the amax NaN (scale 1).
// The casts' amax pass and the kernels that write their output rows' amax
// (RMSNorm, SwiGLU: row_amax) reduce the same bits, so an amax is the same
// float whichever computed it; fp8_amax_device.cuh holds the device side.
inline uint32_t fp8_magnitude_bits(float x) { return std::bit_cast<uint32_t>(x) & 0x7fffffffu; }
inline uint32_t fp8_magnitude_bits(Bf16 x) { return static_cast<uint32_t>(x.bits & 0x7fffu) << 16; }

// The largest magnitude of x's n values (NaN if one is NaN).
template <class T>
float fp8_amax_of(const T* x, size_t n) {
  uint32_t largest = 0;
  for (size_t i = 0; i < n; i++) largest = std::max(largest, fp8_magnitude_bits(x[i]));
  return std::bit_cast<float>(largest);
}

}  // namespace llm
