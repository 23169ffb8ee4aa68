// A bias added to every row of a matrix (the q, k and v projections' biases
// on the fused qkv rows, model/parts/qkv_bias.cpp), and its gradient: the
// column sums of the output's gradient. Storage type T (float or Bf16; the
// sum is taken in fp32 and rounded once); the bias gradient is fp32 in both.
// RoPE in the same pass (rope.h's RopeAngles; cos null: none): forward
// rotates the first `rotated_heads` heads of D columns of each row (the q and
// k heads) after adding the bias; backward first turns those heads of dout
// back, in place, and sums the turned gradient, so the attention part skips
// its own RoPE (docs/architecture.md, "RoPE where q and k are written").
// Invariants: forward works in place; backward sums each column's rows in an
// order fixed by (N, C) alone, in fp32, with no atomics, so the same inputs
// give the same bits run after run; with RoPE the bits are those of the
// composition (forward: row_bias then rope_forward; backward: rope_backward
// then row_bias), each value rounded to T where the composition stores it.
// The input gradient is dout (turned back with RoPE), so there is no op for it.
#pragma once

#include "base/storage_types.h"
#include "model/kernels/rope.h"

namespace llm::cpu {

// x (N, C) row n = x row n + bias (C), in place, then with rope.cos set its
// first rotated_heads heads of D rotated by rope's angles.
template <class T>
void row_bias_forward(T* x, const T* bias, int N, int C, int rotated_heads, int D, RopeAngles rope);

// With rope.cos set, dout's first rotated_heads heads of D turned back by
// rope's angles, in place (dout then is the gradient of the unrotated x);
// then dbias (C) += sum over the N rows of dout (N, C).
template <class T>
void row_bias_backward(float* dbias, T* dout, int N, int C, int rotated_heads, int D,
                       RopeAngles rope);

}  // namespace llm::cpu

// CUDA twins (row_bias.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void row_bias_forward(T* x, const T* bias, int N, int C, int rotated_heads, int D, RopeAngles rope);
template <class T>
void row_bias_backward(float* dbias, T* dout, int N, int C, int rotated_heads, int D,
                       RopeAngles rope);

}  // namespace llm::cuda
