// RMSNorm's GPU pieces shared by rmsnorm.cu (rows of C) and qk_norm.cu (heads
// of D inside wider rows): pack loads and stores that mask a row's tail, the
// rstd formula, and the final stage of the deterministic gain gradient.
// Invariant: both load paths of a pack (one 16-byte access when aligned,
// element by element otherwise) visit the same columns, so sums built from
// them are the same bits whatever the alignment.
#pragma once

#include "device/cuda_kernel_helpers.cuh"

namespace llm::cuda {

// The kPack<T> elements of row at column c0 into fp32 (missing ones past C are
// 0): one 16-byte load when kAligned (then C is a multiple of kPack), element
// by element otherwise.
template <class T, bool kAligned>
__device__ void load_pack(float (&out)[kPack<T>], const T* row, int c0, int C) {
  if constexpr (kAligned) {
    const Pack<T> p = *reinterpret_cast<const Pack<T>*>(row + c0);
#pragma unroll
    for (int k = 0; k < kPack<T>; k++) out[k] = load_f32(&p.v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < kPack<T>; k++) out[k] = c0 + k < C ? load_f32(row + c0 + k) : 0.0f;
  }
}

template <class T, bool kAligned>
__device__ void store_pack(T* row, int c0, int C, const float (&in)[kPack<T>]) {
  if constexpr (kAligned) {
    Pack<T> p;
#pragma unroll
    for (int k = 0; k < kPack<T>; k++) store_f32(&p.v[k], in[k]);
    *reinterpret_cast<Pack<T>*>(row + c0) = p;
  } else {
#pragma unroll
    for (int k = 0; k < kPack<T>; k++)
      if (c0 + k < C) store_f32(row + c0 + k, in[k]);
  }
}

// rstd = 1 / sqrt(mean(x^2) + eps) of a row of C values from its double sum of squares.
__device__ __forceinline__ float rmsnorm_rstd(double sum_sq, int C, float eps) {
  return (float)(1.0 / sqrt(sum_sq / C + eps));
}

// dweight[c] += sum over chunks, in chunk order, of partials[chunk][c]
// (partials: n_chunks rows of C floats), queued on the compute stream.
void sum_gain_partials(float* dweight, const float* partials, int n_chunks, int C);

}  // namespace llm::cuda
