// Rotary position embedding on the CPU, "rotate half" (Hugging Face Llama)
// pairing: element i of a head pairs with element i + D/2. One template over
// the storage type (float or Bf16) of the heads; the rotation is fp32.
// Invariant: backward applies the transposed (inverse) rotation of forward.
#include "model/kernels/rope.h"

#include <cmath>
#include <cstddef>
#include <numbers>

#include "model/kernels/cpu_rope_head.h"

namespace llm {

double rope_frequency(int i, int D, double theta, const RopeScaling& scaling) {
  const double frequency = std::pow(theta, -2.0 * i / D);
  if (scaling.factor == 1.0) return frequency;
  // Where the wavelength falls against the original context, in units of
  // whole turns per context: above high_freq_factor the pair is kept, below
  // low_freq_factor it is slowed by factor, between blended linearly.
  const double turns = scaling.original_context * frequency / (2 * std::numbers::pi);
  if (turns > scaling.high_freq_factor) return frequency;
  if (turns < scaling.low_freq_factor) return frequency / scaling.factor;
  const double smooth =
      (turns - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor);
  return (1 - smooth) * frequency / scaling.factor + smooth * frequency;
}

}  // namespace llm

namespace llm::cpu {

namespace {

// Rotates the first n_heads heads of every row by the angle whose cosine is
// cos and whose sine is sign * sin.
template <class Storage>
void rope_rotate(Storage* x, const float* cos, const float* sin, float sign,
                 const int32_t* positions, int N, int T, int n_heads, int D, int row_stride) {
  const int half = D / 2;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const size_t angles = (size_t)rope_position(positions, n, T) * half;
    for (int h = 0; h < n_heads; h++)
      rope_rotate_head(x + (size_t)n * row_stride + (size_t)h * D, cos + angles, sin + angles, sign,
                       D);
  }
}

}  // namespace

void rope_table(float* cos, float* sin, int T, int D, float theta, const RopeScaling& scaling) {
  const int half = D / 2;
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < half; i++) {
      const double angle = t * rope_frequency(i, D, theta, scaling);
      cos[(size_t)t * half + i] = (float)std::cos(angle);
      sin[(size_t)t * half + i] = (float)std::sin(angle);
    }
  }
}

template <class Storage>
void rope_forward(Storage* x, const float* cos, const float* sin, const int32_t* positions, int N,
                  int T, int n_heads, int D, int row_stride) {
  rope_rotate(x, cos, sin, 1.0f, positions, N, T, n_heads, D, row_stride);
}

template <class Storage>
void rope_backward(Storage* dx, const float* cos, const float* sin, const int32_t* positions, int N,
                   int T, int n_heads, int D, int row_stride) {
  rope_rotate(dx, cos, sin, -1.0f, positions, N, T, n_heads, D, row_stride);
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(rope_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(rope_backward);

}  // namespace llm::cpu
