// Elementwise vector sum on the GPU (add_vectors: the gradient-shard
// accumulator): out = a + b, fp32 math rounded once on
// store, in a grid-stride loop that moves 16 bytes per access (4 fp32 or 8
// bf16 elements) when all three buffers are 16-byte aligned.
// Invariant: each thread reads its elements of a and b before it writes the
// same elements of out, and no other thread touches them, so out may alias a
// or b (the pointers are therefore not __restrict__).
#include <algorithm>
#include <cstdint>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/residual.h"

namespace llm::cuda {

namespace {

constexpr unsigned kThreads = 256;
// Enough blocks to fill an H100 several times over; larger buffers loop.
constexpr unsigned kMaxBlocks = 4096;

// ---- kernels --------------------------------------------------------------------

// With kVectorized, whole packs first, then the n % kPack tail element by element.
template <class T, bool kVectorized>
__global__ void add_kernel(T* out, const T* a, const T* b, size_t n) {
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t scalar_from = 0;
  if constexpr (kVectorized) {
    const size_t n_packs = n / kPack<T>;
    for (size_t p = first; p < n_packs; p += stride) {
      const Pack<T> x = reinterpret_cast<const Pack<T>*>(a)[p];
      const Pack<T> y = reinterpret_cast<const Pack<T>*>(b)[p];
      Pack<T> sum;
#pragma unroll
      for (int k = 0; k < kPack<T>; k++)
        store_f32(&sum.v[k], load_f32(&x.v[k]) + load_f32(&y.v[k]));
      reinterpret_cast<Pack<T>*>(out)[p] = sum;
    }
    scalar_from = n_packs * kPack<T>;
  }
  for (size_t i = scalar_from + first; i < n; i += stride)
    store_f32(out + i, load_f32(a + i) + load_f32(b + i));
}

}  // namespace

// ---- launchers ------------------------------------------------------------------

template <class T>
void add_vectors(T* out, const T* a, const T* b, size_t n) {
  if (n == 0) return;
  const bool vectorized = is_aligned(out, 16) && is_aligned(a, 16) && is_aligned(b, 16);
  const size_t work = vectorized ? (n + kPack<T> - 1) / kPack<T> : n;
  const unsigned blocks = std::min(blocks_for(work, kThreads), kMaxBlocks);
  if (vectorized) {
    launch(add_kernel<T, true>, blocks, kThreads, 0, compute_stream(), out, a, b, n);
  } else {
    launch(add_kernel<T, false>, blocks, kThreads, 0, compute_stream(), out, a, b, n);
  }
  LLM_CUDA_CHECK_LAUNCH();
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(add_vectors);

}  // namespace llm::cuda
