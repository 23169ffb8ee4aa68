// Rotary position embedding, applied in place to the query and key heads that
// sit at the start of each row of the fused qkv buffer.
// Layout: the Hugging Face Llama convention ("rotate half"): within a head of
// size D, element i pairs with element i + D/2 and the pair is rotated by the
// angle pos * theta^(-2i/D). The heads have storage type Storage (float or
// Bf16; not named T, which is the sequence length); the cos/sin tables are
// fp32 in both, and bf16 elements are rotated in fp32 and rounded once.
// Invariant: backward is the exact inverse rotation.
#pragma once

#include <cstdint>

#include "runtime/storage_types.h"

namespace llm::cpu {

// cos, sin (T, D/2): cos/sin of pos * theta^(-2i/D), angles computed in double.
void rope_table(float* cos, float* sin, int T, int D, float theta);

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

void rope_table(float* cos, float* sin, int T, int D, float theta);
template <class Storage>
void rope_forward(Storage* x, const float* cos, const float* sin, const int32_t* positions, int N,
                  int T, int n_heads, int D, int row_stride);
template <class Storage>
void rope_backward(Storage* dx, const float* cos, const float* sin, const int32_t* positions, int N,
                   int T, int n_heads, int D, int row_stride);

}  // namespace llm::cuda
