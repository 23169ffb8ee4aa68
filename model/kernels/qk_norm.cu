// QK-norm on the GPU: RMSNorm of each q and k head of the fused qkv rows (the
// math of rmsnorm.cu, pieces shared through rmsnorm_device.cuh), v heads
// copied bit for bit; fp32 math rounded once on store, for float or Bf16.
// With RoPE (RopeAngles), forward rotates each q and k head before its store
// and backward turns dout's q and k heads back as it loads them: a lane reads
// its columns' partners (c +- D/2) from memory beside its own, so every lane
// keeps the columns and the sums' order of the pass without RoPE.
// A head (D values, D = 64 or 128 in practice) is one warp's work: a block's
// threads over a row, as rmsnorm.cu does, would leave most of them idle.
// Forward: one warp per head of the N * (H + 2 KV). Backward: one block per
// chunk of consecutive rows; its warps take the chunk's heads in turn (warp w
// the heads w, w + warps, ...), each keeping per-column dq/dk_weight partials
// of its heads in shared memory (each lane its own columns, heads in order);
// the block then sums its warps' partials in warp order into the chunk's
// partials, which sum_gain_partials adds up in chunk order.
// Invariants: every reduction has an order fixed by (N, H, KV, D) alone - lane
// columns do not depend on pointer alignment, the chunks on N only, the warps
// per block on D only - and every multiply-add of backward is an explicit
// fmaf, so the aligned and element-wise instantiations round alike whatever
// the compiler would contract: the same inputs give the same bits run after
// run and at any alignment, with no float atomics; backward overwrites dinp and accumulates (+=)
// the gain gradients. With RoPE the bits are those of rope.cu after (forward)
// or before (backward) the pass without it: the same products (the rotation of
// rope_device.cuh), each value rounded to T where the composition stores it.
// The partials scratch grows only for a larger shape.
#include <algorithm>
#include <cstdio>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/qk_norm.h"
#include "model/kernels/rmsnorm_device.cuh"
#include "model/kernels/rope_device.cuh"

namespace llm::cuda {

namespace {

constexpr unsigned kWarpsPerBlock = 8;  // heads per block, and the most warps per chunk
// At most this many row chunks in backward, as in rmsnorm.cu: about eight
// blocks per H100 SM.
constexpr int kMaxRowChunks = 1024;
// Backward's shared partials (two rows of D floats per warp) stay within the
// shared memory every block may use without opting in.
constexpr size_t kDefaultSharedBytes = 48 * 1024;

// ---- device helpers ---------------------------------------------------------------

// src to dst, D values, bits unchanged: lane's packs as load_pack visits them.
template <class T, bool kAligned>
__device__ void copy_head(T* dst, const T* src, int D, int lane) {
  for (int c0 = lane * kPack<T>; c0 < D; c0 += 32 * kPack<T>) {
    if constexpr (kAligned) {
      *reinterpret_cast<Pack<T>*>(dst + c0) = *reinterpret_cast<const Pack<T>*>(src + c0);
    } else {
      for (int k = 0; k < kPack<T> && c0 + k < D; k++) dst[c0 + k] = src[c0 + k];
    }
  }
}

// The partners (rope_partner) of the kPack<T> columns from c0 of a head of
// D, as load_pack loads those columns (0 past D or past the last pair): one
// 16-byte load when kAligned (then D/2 is a multiple of kPack, so the pack
// lies in one half).
template <class T, bool kAligned>
__device__ void load_partner_pack(float (&out)[kPack<T>], const T* head, int c0, int D) {
  const int half = D / 2;
  if constexpr (kAligned) {
    load_pack<T, true>(out, head, rope_partner(c0, half), D);
  } else {
#pragma unroll
    for (int k = 0; k < kPack<T>; k++) {
      const int c = c0 + k;
      out[k] = c < 2 * half ? load_f32(head + rope_partner(c, half)) : 0.0f;
    }
  }
}

// own (the columns from c0 of a head of D) rotated with their partners'
// values by the angles of a table row (cos, sin; sine sign * sin), as
// rope.cu rotates them; a column past the last pair (odd D) keeps its value.
template <class T>
__device__ void rotate_pack(float (&own)[kPack<T>], const float (&partner)[kPack<T>],
                            const float* cos, const float* sin, float sign, int c0, int D) {
  const int half = D / 2;
#pragma unroll
  for (int k = 0; k < kPack<T>; k++) {
    const int c = c0 + k;
    if (c >= 2 * half) continue;
    const int i = c < half ? c : c - half;
    own[k] = rope_rotated(own[k], partner[k], c >= half, cos[i], sign * sin[i]);
  }
}

// The gradient of a normed head's columns from c0: dout's (dy), or, with a
// table row (cos set), dy's turned back with their partners and rounded to T
// as rope_backward stores them.
template <class T, bool kAligned>
__device__ void load_normed_gradient(float (&out)[kPack<T>], const T* dy, int c0, int D,
                                     const float* cos, const float* sin) {
  load_pack<T, kAligned>(out, dy, c0, D);
  if (!cos) return;
  float partner[kPack<T>];
  load_partner_pack<T, kAligned>(partner, dy, c0, D);
  rotate_pack<T>(out, partner, cos, sin, -1.0f, c0, D);
#pragma unroll
  for (int k = 0; k < kPack<T>; k++) out[k] = stored_value<T>(out[k]);
}

// ---- kernels --------------------------------------------------------------------

// Warp w of block b takes head i = b * warps + w of the N * (H + 2 KV) heads
// (row i / (H + 2 KV)); its D values start at i * D. q and k heads: rstd from
// the double sum of squares, y = x * s * w, with RoPE rounded to T and
// rotated with its partner's y; v heads copied. No block barrier, so the
// warps past the last head leave at once.
template <class T, bool kAligned>
__global__ void qk_norm_forward_kernel(T* out, float* rstd, const T* inp, const T* q_weight,
                                       const T* k_weight, int N, int H, int KV, int D, float eps,
                                       RopeAngles rope) {
  const int heads = H + 2 * KV;
  const size_t i = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (i >= (size_t)N * heads) return;
  const int lane = threadIdx.x % 32, h = (int)(i % heads);
  const T* x = inp + i * D;
  T* y = out + i * D;
  if (h >= H + KV) {
    copy_head<T, kAligned>(y, x, D, lane);
    return;
  }
  const T* w = h < H ? q_weight : k_weight;
  const int step = 32 * kPack<T>;

  double sum_sq = 0.0;
  for (int c0 = lane * kPack<T>; c0 < D; c0 += step) {
    float xv[kPack<T>];
    load_pack<T, kAligned>(xv, x, c0, D);
#pragma unroll
    for (int k = 0; k < kPack<T>; k++) sum_sq += (double)xv[k] * xv[k];
  }
  const float s = rmsnorm_rstd(warp_sum(sum_sq), D, eps);

  const size_t angles = rope.cos ? rope_row(rope, i / heads, D) : 0;
  for (int c0 = lane * kPack<T>; c0 < D; c0 += step) {
    float xv[kPack<T>], wv[kPack<T>], yv[kPack<T>];
    load_pack<T, kAligned>(xv, x, c0, D);
    load_pack<T, kAligned>(wv, w, c0, D);
#pragma unroll
    for (int k = 0; k < kPack<T>; k++) yv[k] = xv[k] * s * wv[k];
    if (rope.cos) {
      float xp[kPack<T>], wp[kPack<T>], yp[kPack<T>];  // the partners'
      load_partner_pack<T, kAligned>(xp, x, c0, D);
      load_partner_pack<T, kAligned>(wp, w, c0, D);
#pragma unroll
      for (int k = 0; k < kPack<T>; k++) {
        yv[k] = stored_value<T>(yv[k]);
        yp[k] = stored_value<T>(xp[k] * s * wp[k]);
      }
      rotate_pack<T>(yv, yp, rope.cos + angles, rope.sin + angles, 1.0f, c0, D);
    }
    store_pack<T, kAligned>(y, c0, D, yv);
  }
  if (lane == 0) rstd[(i / heads) * (H + KV) + h] = s;
}

// One block per chunk of rows_per_chunk consecutive rows; warp w takes the
// chunk's heads w, w + warps, ... in order. For a q or k head, with dy
// dout's turned back by RoPE when rope.cos is set (load_normed_gradient):
//   dinp = s * (w * dy - x * coeff), coeff = sum_c(w * dy * x) * s^2 / D,
// and its warp's partial (q or k) gains dy * x * s per column; v heads copy
// dout. Dynamic shared memory holds each warp's two partial rows (padded_D
// floats each). The chunk's partials are then partials[chunk][c] (q) and
// partials[n_chunks + chunk][c] (k): the sum over its warps in warp order.
template <class T, bool kAligned>
__global__ void qk_norm_backward_kernel(T* dinp, float* partials, const T* dout, const T* inp,
                                        const T* q_weight, const T* k_weight, const float* rstd,
                                        int N, int H, int KV, int D, int rows_per_chunk,
                                        RopeAngles rope) {
  LLM_DYNAMIC_SHARED(float, warp_partials);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int padded_D = (D + kPack<T> - 1) / kPack<T> * kPack<T>;
  const int step = 32 * kPack<T>;
  float* q_partial = warp_partials + (size_t)warp * 2 * padded_D;
  float* k_partial = q_partial + padded_D;
  for (int c0 = lane * kPack<T>; c0 < D; c0 += step) {
#pragma unroll
    for (int k = 0; k < kPack<T>; k++) q_partial[c0 + k] = k_partial[c0 + k] = 0.0f;
  }

  const int heads = H + 2 * KV;
  const size_t first = (size_t)blockIdx.x * rows_per_chunk * heads;
  const size_t last = (size_t)min(N, (int)(blockIdx.x + 1) * rows_per_chunk) * heads;
  for (size_t i = first + warp; i < last; i += warps) {
    const int h = (int)(i % heads);
    const T* dy = dout + i * D;
    T* dx = dinp + i * D;
    if (h >= H + KV) {
      copy_head<T, kAligned>(dx, dy, D, lane);
      continue;
    }
    const T* x = inp + i * D;
    const T* w = h < H ? q_weight : k_weight;
    float* partial = h < H ? q_partial : k_partial;
    const float s = rstd[(i / heads) * (H + KV) + h];
    const size_t angles = rope.cos ? rope_row(rope, i / heads, D) : 0;
    const float* cos = rope.cos ? rope.cos + angles : nullptr;
    const float* sin = rope.cos ? rope.sin + angles : nullptr;

    float dot = 0.0f;  // sum_c w * dy * x
    for (int c0 = lane * kPack<T>; c0 < D; c0 += step) {
      float xv[kPack<T>], dyv[kPack<T>], wv[kPack<T>];
      load_pack<T, kAligned>(xv, x, c0, D);
      load_normed_gradient<T, kAligned>(dyv, dy, c0, D, cos, sin);
      load_pack<T, kAligned>(wv, w, c0, D);
#pragma unroll
      for (int k = 0; k < kPack<T>; k++) dot = fmaf(wv[k] * dyv[k], xv[k], dot);
    }
    const float coeff = warp_sum(dot) * s * s / D;

    for (int c0 = lane * kPack<T>; c0 < D; c0 += step) {
      float xv[kPack<T>], dyv[kPack<T>], wv[kPack<T>], dxv[kPack<T>];
      load_pack<T, kAligned>(xv, x, c0, D);
      load_normed_gradient<T, kAligned>(dyv, dy, c0, D, cos, sin);
      load_pack<T, kAligned>(wv, w, c0, D);
#pragma unroll
      for (int k = 0; k < kPack<T>; k++) {
        dxv[k] = s * fmaf(-xv[k], coeff, wv[k] * dyv[k]);
        partial[c0 + k] = fmaf(dyv[k] * xv[k], s, partial[c0 + k]);
      }
      store_pack<T, kAligned>(dx, c0, D, dxv);
    }
  }

  __syncthreads();
  for (int c = threadIdx.x; c < D; c += blockDim.x) {
    float q = 0.0f, k = 0.0f;
    for (int w = 0; w < warps; w++) {
      q += warp_partials[(size_t)w * 2 * padded_D + c];
      k += warp_partials[(size_t)w * 2 * padded_D + padded_D + c];
    }
    partials[(size_t)blockIdx.x * D + c] = q;
    partials[(size_t)(gridDim.x + blockIdx.x) * D + c] = k;
  }
}

// ---- scratch and launch geometry (host) ------------------------------------------

// Whether a head's packs suit 16-byte accesses (given aligned pointers): D a
// multiple of the pack, and with RoPE each half of the head too.
template <class T>
bool pack_aligned(int D, const RopeAngles& rope) {
  return D % kPack<T> == 0 && (!rope.cos || (D / 2) % kPack<T> == 0);
}

// The gain partials of backward, (2 * chunks, D) floats: 8 MiB at most for D = 1024.
float* partials_scratch(size_t floats) {
  static GrowingScratch scratch;
  return static_cast<float*>(scratch.reserve(floats * sizeof(float)));
}

}  // namespace

// ---- launchers ------------------------------------------------------------------

template <class T>
void qk_norm_forward(T* out, float* rstd, const T* inp, const T* q_weight, const T* k_weight, int N,
                     int H, int KV, int D, float eps, RopeAngles rope) {
  if (N <= 0 || D <= 0) return;
  const unsigned blocks = blocks_for((size_t)N * (H + 2 * KV), kWarpsPerBlock);
  const bool aligned = pack_aligned<T>(D, rope) && is_aligned(out, 16) && is_aligned(inp, 16) &&
                       is_aligned(q_weight, 16) && is_aligned(k_weight, 16);
  auto launch_forward = [&](auto kernel) {
    launch(kernel, blocks, kWarpsPerBlock * 32, 0, compute_stream(), out, rstd, inp, q_weight,
           k_weight, N, H, KV, D, eps, rope);
    LLM_CUDA_CHECK_LAUNCH();
  };
  if (aligned) {
    launch_forward(qk_norm_forward_kernel<T, true>);
  } else {
    launch_forward(qk_norm_forward_kernel<T, false>);
  }
}

template <class T>
void qk_norm_backward(T* dinp, float* dq_weight, float* dk_weight, const T* dout, const T* inp,
                      const T* q_weight, const T* k_weight, const float* rstd, int N, int H, int KV,
                      int D, RopeAngles rope) {
  if (N <= 0 || D <= 0) return;
  // Warps per block by D only, as many as the default shared memory holds.
  const int padded_D = (D + kPack<T> - 1) / kPack<T> * kPack<T>;
  const size_t warp_bytes = 2 * sizeof(float) * (size_t)padded_D;
  const unsigned warps =
      (unsigned)std::min<size_t>(kWarpsPerBlock, kDefaultSharedBytes / warp_bytes);
  if (warps == 0) {
    char message[120];
    std::snprintf(message, sizeof message, "head dim D=%d is over the kernel's limit of %zu", D,
                  kDefaultSharedBytes / (2 * sizeof(float)));
    throw_cuda_error("qk_norm_backward", message, __FILE__, __LINE__);
  }
  // The chunking depends on N only, so the gain sums have one order per shape.
  const int rows_per_chunk = (N + kMaxRowChunks - 1) / kMaxRowChunks;
  const int n_chunks = (N + rows_per_chunk - 1) / rows_per_chunk;
  float* partials = partials_scratch((size_t)2 * n_chunks * D);

  const bool aligned = pack_aligned<T>(D, rope) && is_aligned(dinp, 16) && is_aligned(dout, 16) &&
                       is_aligned(inp, 16) && is_aligned(q_weight, 16) && is_aligned(k_weight, 16);
  auto launch_backward = [&](auto kernel) {
    launch(kernel, n_chunks, warps * 32, warps * warp_bytes, compute_stream(), dinp, partials, dout,
           inp, q_weight, k_weight, rstd, N, H, KV, D, rows_per_chunk, rope);
    LLM_CUDA_CHECK_LAUNCH();
  };
  if (aligned) {
    launch_backward(qk_norm_backward_kernel<T, true>);
  } else {
    launch_backward(qk_norm_backward_kernel<T, false>);
  }
  sum_gain_partials(dq_weight, partials, n_chunks, D);
  sum_gain_partials(dk_weight, partials + (size_t)n_chunks * D, n_chunks, D);
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(qk_norm_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(qk_norm_backward);

}  // namespace llm::cuda
