// A bias added to every row of a matrix (the q, k and v projections' biases
// on the fused qkv rows, model/parts/qkv_bias.cpp), and its gradient: the
// column sums of the output's gradient. Storage type T (float or Bf16; the
// sum is taken in fp32 and rounded once); the bias gradient is fp32 in both.
// Invariants: forward works in place; backward sums each column's rows in an
// order fixed by (N, C) alone, in fp32, with no atomics, so the same inputs
// give the same bits run after run; the input gradient is the output's
// unchanged, so there is no op for it.
#pragma once

#include "base/storage_types.h"

namespace llm::cpu {

// x (N, C) row n = x row n + bias (C), in place.
template <class T>
void row_bias_forward(T* x, const T* bias, int N, int C);

// dbias (C) += sum over the N rows of dout (N, C).
template <class T>
void row_bias_backward(float* dbias, const T* dout, int N, int C);

}  // namespace llm::cpu

// CUDA twins (row_bias.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void row_bias_forward(T* x, const T* bias, int N, int C);
template <class T>
void row_bias_backward(float* dbias, const T* dout, int N, int C);

}  // namespace llm::cuda
