// Rotary position embedding, applied in place to the query and key heads that
// sit at the start of each row of the fused qkv buffer.
// Layout: the Hugging Face Llama convention ("rotate half"): within a head of
// size D, element i pairs with element i + D/2 and the pair is rotated by the
// angle pos * f_i, f_i = theta^(-2i/D), or with Llama 3.1's scaling
// (RopeScaling) f_i divided by up to its factor at low frequencies. The heads have storage type
// Storage (float or Bf16; not named T, which is the sequence length); the cos/sin tables are fp32
// in both, and bf16 elements are rotated in fp32 and rounded once. Invariant: backward is the exact
// inverse rotation.
#pragma once

#include <cstdint>

#include "base/storage_types.h"

namespace llm {

// Llama 3.1's RoPE scaling (transformers' rope_type "llama3"): frequencies
// whose wavelength 2 pi / f exceeds original_context / low_freq_factor are
// divided by factor, those below original_context / high_freq_factor kept,
// and those between blended linearly in original_context / wavelength.
// factor 1: no scaling.
struct RopeScaling {
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_context = 8192;
};

// f_i, the angle per position of pair i of a head of D.
double rope_frequency(int i, int D, double theta, const RopeScaling& scaling);

// The angles of a kernel that rotates heads as it writes them (qk_norm.h):
// row n takes row positions[n] of the tables when positions is set (documents
// packed in a sequence restart theirs), else row n % T; cos and sin are
// rope_table's (D/2 per row), from the decode position's row when decoding.
// cos null: no rotation.
struct RopeAngles {
  const float* cos = nullptr;
  const float* sin = nullptr;
  const int32_t* positions = nullptr;
  int T = 0;
};

}  // namespace llm

namespace llm::cpu {

// cos, sin (T, D/2): cos/sin of pos * f_i (rope_frequency), computed in double.
void rope_table(float* cos, float* sin, int T, int D, float theta, const RopeScaling& scaling);

// x: N = B*T rows of row_stride floats; row n has position positions[n]
// (< T, the table's rows) when positions is not null (documents packed in a
// sequence restart theirs), else n % T. Rotates the first n_heads heads (each
// D contiguous floats) of every row, in place.
template <class Storage>
void rope_forward(Storage* x, const float* cos, const float* sin, const int32_t* positions, int N,
                  int T, int n_heads, int D, int row_stride);

// The adjoint: rotates the gradient dx by the opposite angle, in place.
template <class Storage>
void rope_backward(Storage* dx, const float* cos, const float* sin, const int32_t* positions, int N,
                   int T, int n_heads, int D, int row_stride);

}  // namespace llm::cpu

// CUDA twins (rope.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void rope_table(float* cos, float* sin, int T, int D, float theta, const RopeScaling& scaling);
template <class Storage>
void rope_forward(Storage* x, const float* cos, const float* sin, const int32_t* positions, int N,
                  int T, int n_heads, int D, int row_stride);
template <class Storage>
void rope_backward(Storage* dx, const float* cos, const float* sin, const int32_t* positions, int N,
                   int T, int n_heads, int D, int row_stride);

}  // namespace llm::cuda
