// RoPE's GPU pieces shared by rope.cu (heads rotated in place) and qk_norm.cu
// (q and k heads rotated as QK-norm writes them): an element's partner and
// its rotated value.
// Invariant: the rotation is one explicit fmaf over a rounded product, which
// no compiler contracts further, so both kernels give the same bits whatever
// they are inlined into. (The emulated build, which contracts, computed the
// plain expression in this form: its training bits did not change; nvcc's
// choice is not yet checked on a GPU.) The CPU twin rounds both products, so
// the twins may differ in the last bit.
#pragma once

#include "device/cuda_kernel_helpers.cuh"

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

}  // namespace llm::cuda
