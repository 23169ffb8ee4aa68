// What the CUDA kernels share: launch geometry, alignment tests, 16-byte
// packs, fp32 loads and stores of float or bf16 storage, and the warp and
// block reductions. Each helper is defined here once; a kernel file keeps
// only what is its own.
// Invariant: every reduction combines in a tree fixed by the lane and warp
// pattern alone (never by timing or arrival order), so the same inputs and
// block size give the same bits run after run; with an operation that is
// commutative bit for bit (combine(a, b) == combine(b, a), as float + and
// fmaxf are), every thread receives the same bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "base/bf16.h"

namespace llm::cuda {

// ---- launch geometry and alignment (host) ------------------------------------------

// Blocks of `per_block` items covering n items (at least one block).
inline unsigned blocks_for(size_t n, unsigned per_block) {
  size_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks == 0 ? 1 : blocks);
}

// Whether p is aligned to `bytes` (a vector access of that width is legal).
inline bool is_aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// ---- packs ---------------------------------------------------------------------------

// Elements of T in one 16-byte access: 4 fp32 or 8 bf16.
template <class T>
inline constexpr int kPack = 16 / sizeof(T);

// kWidth elements of T aligned to their total size, so that one load or store
// moves them all (16 bytes by default).
template <class T, int kWidth = kPack<T>>
struct alignas(sizeof(T) * kWidth) Pack {
  T v[kWidth];
};

// ---- fp32 loads and stores -------------------------------------------------------

// Loads and stores with fp32 math between, for kernels templated on the
// storage type (float or Bf16, whose bits are a __nv_bfloat16).
__device__ __forceinline__ float load_f32(const float* p) { return *p; }
__device__ __forceinline__ float load_f32(const Bf16* p) {
  return __uint_as_float(static_cast<uint32_t>(p->bits) << 16);
}
__device__ __forceinline__ void store_f32(float* p, float value) { *p = value; }
// Round to nearest even, as float_to_bf16 on the host (NaN stays NaN).
__device__ __forceinline__ void store_f32(Bf16* p, float value) {
  p->bits = __bfloat16_as_ushort(__float2bfloat16_rn(value));
}

// ---- reductions ----------------------------------------------------------------------

// The lane exchange of the reductions, for the types __shfl_xor_sync takes. A
// kernel reducing a struct overloads shuffle_xor for it beside the struct
// (argument-dependent lookup finds it).
template <class V>
__device__ __forceinline__ V shuffle_xor(V v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}

struct Sum {
  template <class V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return a + b;
  }
};

// v combined over each aligned group of kLanes consecutive lanes (a power of
// two, at most 32), returned to every lane of the group: a butterfly whose
// step `offset` combines each lane's value with that of lane ^ offset. All 32
// lanes of the warp must call it.
template <int kLanes = 32, class V, class Combine>
__device__ __forceinline__ V warp_reduce(V v, Combine combine) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0,
                "kLanes must be a power of two no larger than a warp");
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) v = combine(v, shuffle_xor(v, offset));
  return v;
}

template <int kLanes = 32, class V>
__device__ __forceinline__ V warp_sum(V v) {
  return warp_reduce<kLanes>(v, Sum{});
}

// v combined over the whole block, returned to every thread: each warp reduces
// its lanes (warp_reduce), then warp 0 reduces the warps' results in warp
// order, padded with `identity` to 32.
// Contract: every thread of the block calls it (it has barriers); blockDim.x
// is a multiple of 32, at most 1024; combine(identity, x) == x; V can live in
// __shared__ (no constructor). A call may follow another at once (e.g. one
// per row in a loop): the result is read from a slot that the next call
// writes only after its own first barrier.
template <class V, class Combine>
__device__ V block_reduce(V v, V identity, Combine combine) {
  __shared__ V warp_results[32];
  __shared__ V total;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce(v, combine);
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)(blockDim.x / 32) ? warp_results[lane] : identity;
    v = warp_reduce(v, combine);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

template <class V>
__device__ V block_sum(V v) {
  return block_reduce(v, V(0), Sum{});
}

}  // namespace llm::cuda
