// RoPE's GPU pieces shared by rope.cu (heads rotated in place), qk_norm.cu
// and row_bias.cu (q and k heads rotated as QK-norm or the qkv bias writes
// them): an element's partner, its rotated value, a row's angles, and the
// rounding to the storage type that the composition's stores apply.
// Invariant: the rotation is one explicit fmaf over a rounded product, which
// no compiler contracts further, so all three give the same bits whatever
// they are inlined into. (The emulated build, which contracts, computed the
// plain expression in this form: its training bits did not change; nvcc's
// choice is not yet checked on a GPU.) The CPU twin rounds both products, so
// the twins may differ in the last bit.
#pragma once

#include "device/cuda_kernel_helpers.cuh"
#include "model/kernels/rope.h"

namespace llm::cuda {

// Element c's partner in a head of 2 * half (c + half or c - half).
__device__ __forceinline__ int rope_partner(int c, int half) {
  return c < half ? c + half : c - half;
}

// The rotated value of an element of a pair (lo, hi) by the angle with cosine
// `cos` and sine `sine`: lo' = lo cos - hi sine, hi' = hi cos + lo sine; own
// is the element, partner the other one, second whether own is hi.
__device__ __forceinline__ float rope_rotated(float own, float partner, bool second, float cos,
                                              float sine) {
  const float turned = partner * sine;
  return fmaf(own, cos, second ? turned : -turned);
}

// The table row of fused-qkv row n's angles (rope.cos set).
__device__ __forceinline__ size_t rope_row(const RopeAngles& rope, size_t n, int D) {
  const size_t position = rope.positions ? (size_t)rope.positions[n] : n % rope.T;
  return position * (D / 2);
}

// v rounded to T, as storing it in T and loading it back rounds it.
template <class T>
__device__ __forceinline__ float stored_value(float v) {
  T stored;
  store_f32(&stored, v);
  return load_f32(&stored);
}

}  // namespace llm::cuda
