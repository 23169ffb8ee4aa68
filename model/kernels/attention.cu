// Causal grouped-query attention on the GPU, flash-style (the CUDA twin of
// attention.cpp): tiles of queries, keys and values are staged in shared
// memory and the (T, T) score matrix never exists; forward keeps a running max
// and sum per query (online softmax) and writes lse; backward recomputes the
// probabilities from lse.
// Kernels (128 threads each; tiles of 32 or 64 rows, see Tiles):
//  - forward: one block per (query tile, query head, batch) sweeps the key
//    tiles up to the diagonal: S = Q K^T, online softmax, O = O * rescale + P V.
//  - backward, key/value gradients: one block per (key tile, kv head, batch)
//    loops over every query head of its group, then over the query tiles from
//    the diagonal on, summing dV += P^T dO and dK += dS^T Q in that fixed order.
//  - backward, query gradients: one block per (query tile, query head, batch)
//    sums dQ += dS K over the key tiles up to the diagonal.
//  Both backward kernels compute delta_t = dout_t . out_t for the query rows
//  they load (one warp per row, a fixed-order sum), instead of a preprocessing
//  kernel writing it to a scratch buffer: the op has no workspace argument, and
//  the cost is one more (rows, D) read and under 1% more multiply-adds.
// Every tile product reads its operands from shared memory and writes its fp32
// result there (tile_product): on CUDA cores with fp32 FMAs for float storage,
// on tensor cores (nvcuda::wmma bf16 16x16x16, fp32 accumulation) for bf16.
// bf16 numerics: Q, K, V and dO are bf16 already, so S = Q K^T and dP = dO V^T
// are exact products summed in fp32. The probabilities P (for O += P V and
// dV += P^T dO) and score gradients dS (for dK += dS^T Q and dQ += dS K) are
// computed in fp32 but rounded to bf16 (to nearest even: 2^-8 relative at
// most) to enter the mma, where the CPU twin keeps them in fp32; lse and the
// softmax sums use the unrounded P. All else is fp32, each output rounded once.
// Document masking (doc_start not null, see attention.h): query t sees keys
// [doc_start[t], t]; forward and the query gradients start at the key tile of
// their query tile's first document start, and the key/value gradients stop
// at the first query tile whose queries all start after the key tile, so the
// tiles the mask empties are never loaded (doc_start never decreases along a
// sequence). A query row that has seen no key yet keeps a zero sum. Without
// it every kernel computes what the causal one does, bit for bit.
// Head dims 1..128: a tile is padded with zero columns to the next of 16, 32,
// 64 or 128 (the template parameter), which leaves every dot product unchanged.
// Invariants: deterministic - no atomics; every sum runs in an order fixed by
// the shape, so the same inputs give the same bits run after run; backward
// overwrites dqkv, each element written by exactly one thread; scale
// 1/sqrt(D); query head h reads kv head h / (H / KV).
#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <utility>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/attention.h"

namespace llm::cuda {

namespace {

constexpr int kThreads = 128;  // every kernel: 4 warps
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 128;
constexpr float kLog2e = 1.44269504088896341f;  // exp(x) = exp2(x * log2(e))

// Problem shape, passed by value to every kernel.
struct AttentionDims {
  int B, T, H, KV, D;
  float scale;  // 1 / sqrt(D), computed on the host as the CPU twin does
  __host__ __device__ size_t qkv_row() const { return (size_t)(H + 2 * KV) * D; }
  __host__ __device__ size_t out_row() const { return (size_t)H * D; }
};

// ---- tile configuration and shared-memory layouts --------------------------------

// Tile sizes per storage type and padded head dim, chosen so that every
// kernel's shared memory stays at or below ~110 KiB (two blocks per H100 SM;
// the launchers opt in above the default 48 KiB). Elements of Q, K, V, dO and
// of the mma operands P, dS are bf16 on the tensor-core path and fp32 on the
// FMA path; score tiles and accumulators are fp32 in both.
template <class Storage, int kHeadDim>
struct Tiles {
  static constexpr bool kTensorCores = std::is_same_v<Storage, Bf16>;
  using Element = std::conditional_t<kTensorCores, __nv_bfloat16, float>;
  // Row padding in elements. wmma needs rows that are multiples of 16 bytes
  // (8 bf16, 4 floats); +8 / +4 also shifts each row by 16 bytes across the
  // banks. The FMA path pads by one float, so a column's rows (read across a
  // warp) fall in distinct banks.
  static constexpr int kPad = kTensorCores ? 8 : 1;
  static constexpr int kAccumulatorPad = kTensorCores ? 4 : 1;
  static constexpr int ld(int cols) { return cols + kPad; }                 // Element tiles
  static constexpr int ld_acc(int cols) { return cols + kAccumulatorPad; }  // fp32 tiles
  // fp32 tiles of 128-wide rows are twice the bytes: halve them there.
  static constexpr bool kHalfTiles = !kTensorCores && kHeadDim == 128;
  static constexpr int kForwardQueries = kHalfTiles ? 32 : 64;
  static constexpr int kForwardKeys = kHalfTiles ? 32 : 64;
  static constexpr int kKvKeys = kHeadDim == 128 ? 32 : 64;  // keys per block
  static constexpr int kKvQueries = 32;                      // queries per step
  static constexpr int kDqQueries = kHalfTiles ? 32 : 64;    // queries per block
  static constexpr int kDqKeys = 32;                         // keys per step
};

// Byte offset after a buffer of `rows` x `ld` values of `size` bytes that
// starts at `at`, rounded up to 128 bytes (wmma wants 32-byte aligned tiles).
constexpr size_t after(size_t at, int rows, int ld, size_t size) {
  return (at + (size_t)rows * ld * size + 127) / 128 * 128;
}

template <class Storage, int kHeadDim>
struct ForwardLayout {
  using Cfg = Tiles<Storage, kHeadDim>;
  static constexpr int kQ = Cfg::kForwardQueries, kK = Cfg::kForwardKeys;
  static constexpr size_t kE = sizeof(typename Cfg::Element);
  static constexpr int ld_qkv = Cfg::ld(kHeadDim), ld_scores = Cfg::ld_acc(kK);
  static constexpr int ld_probs = Cfg::ld(kK), ld_outs = Cfg::ld_acc(kHeadDim);
  static constexpr size_t queries = 0;                             // (kQ, D) Element
  static constexpr size_t keys = after(queries, kQ, ld_qkv, kE);   // (kK, D) Element
  static constexpr size_t values = after(keys, kK, ld_qkv, kE);    // (kK, D) Element
  static constexpr size_t scores = after(values, kK, ld_qkv, kE);  // (kQ, kK) fp32
  static constexpr size_t scores_end = after(scores, kQ, ld_scores, 4);
  // fp32 P overwrites the scores it comes from (each by the thread that read it).
  static constexpr size_t probs = Cfg::kTensorCores ? scores_end : scores;  // (kQ, kK) Element
  static constexpr size_t outs =
      Cfg::kTensorCores ? after(probs, kQ, ld_probs, kE) : scores_end;  // (kQ, D) fp32
  static constexpr size_t row_inverse = after(outs, kQ, ld_outs, 4);    // (kQ) fp32
  static constexpr size_t bytes = after(row_inverse, 1, kQ, 4);
};

template <class Storage, int kHeadDim>
struct KvLayout {
  using Cfg = Tiles<Storage, kHeadDim>;
  static constexpr int kK = Cfg::kKvKeys, kQ = Cfg::kKvQueries;
  static constexpr size_t kE = sizeof(typename Cfg::Element);
  static constexpr int ld_qkv = Cfg::ld(kHeadDim), ld_acc = Cfg::ld_acc(kHeadDim);
  static constexpr int ld_scores = Cfg::ld_acc(kQ), ld_probs = Cfg::ld(kQ);
  static constexpr size_t keys = 0;                                  // (kK, D) Element
  static constexpr size_t values = after(keys, kK, ld_qkv, kE);      // (kK, D) Element
  static constexpr size_t dkeys = after(values, kK, ld_qkv, kE);     // (kK, D) fp32
  static constexpr size_t dvalues = after(dkeys, kK, ld_acc, 4);     // (kK, D) fp32
  static constexpr size_t queries = after(dvalues, kK, ld_acc, 4);   // (kQ, D) Element
  static constexpr size_t douts = after(queries, kQ, ld_qkv, kE);    // (kQ, D) Element
  static constexpr size_t scores = after(douts, kQ, ld_qkv, kE);     // (kK, kQ) fp32: S^T
  static constexpr size_t dprobs = after(scores, kK, ld_scores, 4);  // (kK, kQ) fp32: dP^T
  static constexpr size_t dprobs_end = after(dprobs, kK, ld_scores, 4);
  // fp32 P^T and dS^T overwrite S^T and dP^T in place.
  static constexpr size_t probs = Cfg::kTensorCores ? dprobs_end : scores;  // (kK, kQ) Element
  static constexpr size_t dscores =
      Cfg::kTensorCores ? after(probs, kK, ld_probs, kE) : dprobs;  // (kK, kQ) Element
  static constexpr size_t rows_at =
      Cfg::kTensorCores ? after(dscores, kK, ld_probs, kE) : dprobs_end;
  static constexpr size_t lse_log2 = rows_at;                  // (kQ) fp32: lse * log2(e)
  static constexpr size_t deltas = after(lse_log2, 1, kQ, 4);  // (kQ) fp32
  static constexpr size_t bytes = after(deltas, 1, kQ, 4);
};

template <class Storage, int kHeadDim>
struct DqLayout {
  using Cfg = Tiles<Storage, kHeadDim>;
  static constexpr int kQ = Cfg::kDqQueries, kK = Cfg::kDqKeys;
  static constexpr size_t kE = sizeof(typename Cfg::Element);
  static constexpr int ld_qkv = Cfg::ld(kHeadDim), ld_acc = Cfg::ld_acc(kHeadDim);
  static constexpr int ld_scores = Cfg::ld_acc(kK), ld_probs = Cfg::ld(kK);
  static constexpr size_t queries = 0;                               // (kQ, D) Element
  static constexpr size_t douts = after(queries, kQ, ld_qkv, kE);    // (kQ, D) Element
  static constexpr size_t keys = after(douts, kQ, ld_qkv, kE);       // (kK, D) Element
  static constexpr size_t values = after(keys, kK, ld_qkv, kE);      // (kK, D) Element
  static constexpr size_t dqueries = after(values, kK, ld_qkv, kE);  // (kQ, D) fp32
  static constexpr size_t scores = after(dqueries, kQ, ld_acc, 4);   // (kQ, kK) fp32
  static constexpr size_t dprobs = after(scores, kQ, ld_scores, 4);  // (kQ, kK) fp32
  static constexpr size_t dprobs_end = after(dprobs, kQ, ld_scores, 4);
  // fp32 dS overwrites dP in place.
  static constexpr size_t dscores = Cfg::kTensorCores ? dprobs_end : dprobs;  // (kQ, kK) Element
  static constexpr size_t rows_at =
      Cfg::kTensorCores ? after(dscores, kQ, ld_probs, kE) : dprobs_end;
  static constexpr size_t lse_log2 = rows_at;                  // (kQ) fp32
  static constexpr size_t deltas = after(lse_log2, 1, kQ, 4);  // (kQ) fp32
  static constexpr size_t bytes = after(deltas, 1, kQ, 4);
};

// ---- device helpers ----------------------------------------------------------------

// Storage -> shared element (bf16 bits are copied, so exact) and fp32 <-> element.
__device__ __forceinline__ float to_element(const float* p) { return *p; }
__device__ __forceinline__ __nv_bfloat16 to_element(const Bf16* p) {
  return __ushort_as_bfloat16(p->bits);
}
__device__ __forceinline__ float element_to_f32(float x) { return x; }
__device__ __forceinline__ float element_to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class Element>
__device__ __forceinline__ Element f32_to_element(float x) {
  if constexpr (std::is_same_v<Element, float>)
    return x;
  else
    return __float2bfloat16_rn(x);
}

// The combine of warp_reduce for a row's running max (fmaxf(a, b) == fmaxf(b, a)).
struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// dst (kRows, kCols) in shared memory (row stride ld) = rows of D values read
// `stride` apart from src, zero past valid_rows and past D. Packed: 16-byte
// loads, when the caller has checked that D and the pointers allow them.
template <int kRows, int kCols, class Storage, class Element>
__device__ void load_tile(Element* dst, int ld, const Storage* src, size_t stride, int valid_rows,
                          int D, bool packed) {
  if (packed) {
    // D % kPack<Storage> == 0: a pack is all in or all out.
    constexpr int kPacksPerRow = kCols / kPack<Storage>;
    for (int i = threadIdx.x; i < kRows * kPacksPerRow; i += kThreads) {
      const int r = i / kPacksPerRow, d = i % kPacksPerRow * kPack<Storage>;
      uint4 bits = make_uint4(0u, 0u, 0u, 0u);
      if (r < valid_rows && d < D) bits = *reinterpret_cast<const uint4*>(src + r * stride + d);
      Element* to = dst + r * ld + d;
      if constexpr (std::is_same_v<Element, float>) {
        // fp32 rows are padded by one float, so not 16-byte aligned.
        to[0] = __uint_as_float(bits.x), to[1] = __uint_as_float(bits.y);
        to[2] = __uint_as_float(bits.z), to[3] = __uint_as_float(bits.w);
      } else {
        *reinterpret_cast<uint4*>(to) = bits;  // bf16 rows are multiples of 16 bytes
      }
    }
  } else {
    for (int i = threadIdx.x; i < kRows * kCols; i += kThreads) {
      const int r = i / kCols, d = i % kCols;
      dst[r * ld + d] = r < valid_rows && d < D ? to_element(src + r * stride + d)
                                                : f32_to_element<Element>(0.0f);
    }
  }
}

// Stores the first valid_rows x D values of an fp32 shared tile, each times
// its row's factor when there is one, rounded once to the storage type.
template <int kRows, int kCols, class Storage>
__device__ void store_tile(Storage* dst, size_t stride, const float* src, int ld,
                           const float* row_factors, int valid_rows, int D) {
  for (int i = threadIdx.x; i < kRows * kCols; i += kThreads) {
    const int r = i / kCols, d = i % kCols;
    if (r < valid_rows && d < D) {
      const float value = src[r * ld + d];
      store_f32(dst + r * stride + d, row_factors ? value * row_factors[r] : value);
    }
  }
}

__device__ void zero_tile(float* dst, int count) {
  for (int i = threadIdx.x; i < count; i += kThreads) dst[i] = 0.0f;
}

// C (M, N) = A B, or C += A B when kAccumulate; A (M, K) row-major; B (K, N)
// row-major, or stored as its transpose (N, K) when kTransposedB. All in
// shared memory; every thread of the block must call it.
// fp32: each thread owns a (M / 8) x (N / 16) grid of C (rows tr + 8 i,
// columns tc + 16 j) and sums over k in order with FMAs.
template <int M, int N, int K, bool kAccumulate, bool kTransposedB>
__device__ void tile_product(float* c, int ldc, const float* a, int lda, const float* b, int ldb) {
  constexpr int kCols = 16, kRows = kThreads / kCols;
  static_assert(M % kRows == 0 && N % kCols == 0, "tile does not split over the block");
  constexpr int kRowsPer = M / kRows, kColsPer = N / kCols;
  const int tr = threadIdx.x / kCols, tc = threadIdx.x % kCols;
  float acc[kRowsPer][kColsPer];
#pragma unroll
  for (int i = 0; i < kRowsPer; i++)
#pragma unroll
    for (int j = 0; j < kColsPer; j++)
      acc[i][j] = kAccumulate ? c[(tr + i * kRows) * ldc + tc + j * kCols] : 0.0f;
#pragma unroll 4
  for (int k = 0; k < K; k++) {
    float av[kRowsPer], bv[kColsPer];
#pragma unroll
    for (int i = 0; i < kRowsPer; i++) av[i] = a[(tr + i * kRows) * lda + k];
#pragma unroll
    for (int j = 0; j < kColsPer; j++)
      bv[j] = kTransposedB ? b[(tc + j * kCols) * ldb + k] : b[k * ldb + tc + j * kCols];
#pragma unroll
    for (int i = 0; i < kRowsPer; i++)
#pragma unroll
      for (int j = 0; j < kColsPer; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
  }
#pragma unroll
  for (int i = 0; i < kRowsPer; i++)
#pragma unroll
    for (int j = 0; j < kColsPer; j++) c[(tr + i * kRows) * ldc + tc + j * kCols] = acc[i][j];
}

// bf16: tensor cores. Each warp owns 16 x 16 tiles of C (warp, warp + 4, ...)
// and sums over K in steps of 16 with fp32 accumulation.
template <int M, int N, int K, bool kAccumulate, bool kTransposedB>
__device__ void tile_product(float* c, int ldc, const __nv_bfloat16* a, int lda,
                             const __nv_bfloat16* b, int ldb) {
  namespace wmma = nvcuda::wmma;
  static_assert(M % 16 == 0 && N % 16 == 0 && K % 16 == 0, "wmma tiles are 16 x 16 x 16");
  // B^T stored row-major is B stored column-major.
  using BLayout = std::conditional_t<kTransposedB, wmma::col_major, wmma::row_major>;
  constexpr int kTilesN = N / 16, kTiles = M / 16 * kTilesN;
  for (int tile = threadIdx.x / 32; tile < kTiles; tile += kWarps) {
    const int m0 = tile / kTilesN * 16, n0 = tile % kTilesN * 16;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    if constexpr (kAccumulate) {
      wmma::load_matrix_sync(acc, c + m0 * ldc + n0, ldc, wmma::mem_row_major);
    } else {
      wmma::fill_fragment(acc, 0.0f);
    }
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, BLayout> fb;
      wmma::load_matrix_sync(fa, a + m0 * lda + k0, lda);
      wmma::load_matrix_sync(fb, kTransposedB ? b + n0 * ldb + k0 : b + k0 * ldb + n0, ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c + m0 * ldc + n0, acc, ldc, wmma::mem_row_major);
  }
}

// deltas[r] = dout_r . out_r (fp32, zero past valid_rows): one warp per row,
// lanes striding over D, then a butterfly; the douts tile is in shared memory.
template <int kRows, class Storage, class Element>
__device__ void compute_deltas(float* deltas, const Element* douts, int ld, const Storage* out,
                               size_t stride, int valid_rows, int D) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < kRows; r += kWarps) {
    float sum = 0.0f;
    if (r < valid_rows) {
      for (int d = lane; d < D; d += 32)
        sum += element_to_f32(douts[r * ld + d]) * load_f32(out + r * stride + d);
    }
    sum = warp_sum(sum);
    if (lane == 0) deltas[r] = sum;
  }
}

// lse_log2[r] = lse of query q0 + r times log2(e) (0 past T), so that
// p = exp2(score * scale * log2(e) - lse_log2).
template <int kRows>
__device__ void load_lse(float* lse_log2, const float* lse_row, int valid_rows) {
  for (int r = threadIdx.x; r < kRows; r += kThreads)
    lse_log2[r] = r < valid_rows ? lse_row[r] * kLog2e : 0.0f;
}

// ---- kernels -----------------------------------------------------------------------

// Grid (query tiles, H, B); the last (heaviest, most keys) tiles start first.
template <class Storage, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(Storage* out, float* lse, const Storage* qkv, const int32_t* doc_start,
                             AttentionDims dims, bool packed) {
  using Cfg = Tiles<Storage, kHeadDim>;
  using Element = typename Cfg::Element;
  using L = ForwardLayout<Storage, kHeadDim>;
  constexpr int kQ = L::kQ, kK = L::kK;
  LLM_DYNAMIC_SHARED(unsigned char, shared);
  Element* queries = reinterpret_cast<Element*>(shared + L::queries);
  Element* keys = reinterpret_cast<Element*>(shared + L::keys);
  Element* values = reinterpret_cast<Element*>(shared + L::values);
  float* scores = reinterpret_cast<float*>(shared + L::scores);
  Element* probs = reinterpret_cast<Element*>(shared + L::probs);
  float* outs = reinterpret_cast<float*>(shared + L::outs);  // unnormalized, fp32
  float* row_inverse = reinterpret_cast<float*>(shared + L::row_inverse);

  const int T = dims.T, H = dims.H, KV = dims.KV, D = dims.D;
  const int h = blockIdx.y, b = blockIdx.z, g = h / (H / KV);
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kQ;
  const size_t row = dims.qkv_row();
  const Storage* tokens = qkv + (size_t)b * T * row;
  const float scale_log2 = dims.scale * kLog2e;

  load_tile<kQ, kHeadDim>(queries, L::ld_qkv, tokens + (size_t)q0 * row + (size_t)h * D, row,
                          min(kQ, T - q0), D, packed);
  zero_tile(outs, kQ * L::ld_outs);

  // Softmax state: kRowThreads consecutive threads share row r (query t) and
  // hold identical copies of its running max (of raw scores) and sum.
  constexpr int kRowThreads = kThreads / kQ;
  constexpr int kColsPer = kK / kRowThreads;
  const int r = threadIdx.x / kRowThreads, part = threadIdx.x % kRowThreads;
  const int t = q0 + r;
  float row_max = -INFINITY, row_sum = 0.0f;
  const int32_t* starts = doc_start ? doc_start + (size_t)b * T : nullptr;
  const int lo = starts && t < T ? starts[t] : 0;  // the first key query t sees

  const int key_tiles = (min(q0 + kQ, T) - 1) / kK + 1;  // up to the last visible key
  for (int kt = starts ? starts[q0] / kK : 0; kt < key_tiles; kt++) {
    const int k0 = kt * kK;
    __syncthreads();  // the previous tile's K, V and P are no longer read
    const Storage* key_rows = tokens + (size_t)k0 * row + (size_t)(H + g) * D;
    load_tile<kK, kHeadDim>(keys, L::ld_qkv, key_rows, row, min(kK, T - k0), D, packed);
    load_tile<kK, kHeadDim>(values, L::ld_qkv, key_rows + (size_t)KV * D, row, min(kK, T - k0), D,
                            packed);
    __syncthreads();
    tile_product<kQ, kK, kHeadDim, false, true>(scores, L::ld_scores, queries, L::ld_qkv, keys,
                                                L::ld_qkv);
    __syncthreads();
    // Key s is visible to query t when lo <= s <= t (and s < T: rows past T
    // are never stored). Without doc_start every row sees key 0, so its max
    // is finite after tile 0; with it a row may see no key of a tile yet.
    float x[kColsPer];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kColsPer; j++) {
      const int c = part + j * kRowThreads, s = k0 + c;
      x[j] = s >= lo && s <= t && s < T ? scores[r * L::ld_scores + c] : -INFINITY;
      tile_max = fmaxf(tile_max, x[j]);
    }
    const float new_max = fmaxf(row_max, warp_reduce<kRowThreads>(tile_max, Max{}));
    const float shift = new_max == -INFINITY ? 0.0f : new_max;    // no key seen yet: p = 0
    const float rescale = exp2f((row_max - shift) * scale_log2);  // 0 on the first tile
    float tile_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kColsPer; j++) {
      const float p = exp2f((x[j] - shift) * scale_log2);  // 0 where masked
      tile_sum += p;
      probs[r * L::ld_probs + part + j * kRowThreads] = f32_to_element<Element>(p);
    }
    row_sum = row_sum * rescale + warp_sum<kRowThreads>(tile_sum);
    row_max = new_max;
    for (int d = part; d < kHeadDim; d += kRowThreads) outs[r * L::ld_outs + d] *= rescale;
    __syncthreads();
    tile_product<kQ, kHeadDim, kK, true, false>(outs, L::ld_outs, probs, L::ld_probs, values,
                                                L::ld_qkv);
  }
  __syncthreads();
  if (part == 0) {
    row_inverse[r] = 1.0f / row_sum;
    if (t < T) lse[((size_t)b * H + h) * T + t] = row_max * dims.scale + logf(row_sum);
  }
  __syncthreads();
  const size_t out_row = dims.out_row();
  store_tile<kQ, kHeadDim>(out + ((size_t)b * T + q0) * out_row + (size_t)h * D, out_row, outs,
                           L::ld_outs, row_inverse, min(kQ, T - q0), D);
}

// Grid (key tiles, KV, B): dK and dV of one key tile of kv head g, summed over
// the query heads of g in order, and for each over the query tiles from the
// diagonal on, in order.
template <class Storage, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    attention_backward_kv_kernel(Storage* dqkv, const Storage* dout, const Storage* qkv,
                                 const Storage* out, const float* lse, const int32_t* doc_start,
                                 AttentionDims dims, bool packed) {
  using Cfg = Tiles<Storage, kHeadDim>;
  using Element = typename Cfg::Element;
  using L = KvLayout<Storage, kHeadDim>;
  constexpr int kK = L::kK, kQ = L::kQ;
  LLM_DYNAMIC_SHARED(unsigned char, shared);
  Element* keys = reinterpret_cast<Element*>(shared + L::keys);
  Element* values = reinterpret_cast<Element*>(shared + L::values);
  float* dkeys = reinterpret_cast<float*>(shared + L::dkeys);
  float* dvalues = reinterpret_cast<float*>(shared + L::dvalues);
  Element* queries = reinterpret_cast<Element*>(shared + L::queries);
  Element* douts = reinterpret_cast<Element*>(shared + L::douts);
  float* scores = reinterpret_cast<float*>(shared + L::scores);  // S^T: (key, query)
  float* dprobs = reinterpret_cast<float*>(shared + L::dprobs);  // dP^T
  Element* probs = reinterpret_cast<Element*>(shared + L::probs);
  Element* dscores = reinterpret_cast<Element*>(shared + L::dscores);
  float* lse_log2 = reinterpret_cast<float*>(shared + L::lse_log2);
  float* deltas = reinterpret_cast<float*>(shared + L::deltas);

  const int T = dims.T, H = dims.H, KV = dims.KV, D = dims.D;
  const int g = blockIdx.y, b = blockIdx.z, group = H / KV;
  const int k0 = blockIdx.x * kK, valid_keys = min(kK, T - k0);
  const size_t row = dims.qkv_row(), out_row = dims.out_row();
  const Storage* tokens = qkv + (size_t)b * T * row;
  const Storage* dout_tokens = dout + (size_t)b * T * out_row;
  const Storage* out_tokens = out + (size_t)b * T * out_row;
  const float scale = dims.scale, scale_log2 = dims.scale * kLog2e;

  const size_t key_offset = (size_t)k0 * row + (size_t)(H + g) * D;
  load_tile<kK, kHeadDim>(keys, L::ld_qkv, tokens + key_offset, row, valid_keys, D, packed);
  load_tile<kK, kHeadDim>(values, L::ld_qkv, tokens + key_offset + (size_t)KV * D, row, valid_keys,
                          D, packed);
  zero_tile(dkeys, kK * L::ld_acc);
  zero_tile(dvalues, kK * L::ld_acc);

  const int32_t* starts = doc_start ? doc_start + (size_t)b * T : nullptr;
  const int query_tiles = (T + kQ - 1) / kQ;
  for (int h = g * group; h < (g + 1) * group; h++) {
    for (int qt = k0 / kQ; qt < query_tiles; qt++) {  // tiles before k0 / kQ see no key here
      const int q0 = qt * kQ, valid_queries = min(kQ, T - q0);
      // Every query from here on starts its document after this key tile.
      if (starts && starts[q0] >= k0 + valid_keys) break;
      __syncthreads();  // the previous step's Q, dO, P and dS are no longer read
      const size_t query_offset = (size_t)q0 * row + (size_t)h * D;
      const size_t dout_offset = (size_t)q0 * out_row + (size_t)h * D;
      load_tile<kQ, kHeadDim>(queries, L::ld_qkv, tokens + query_offset, row, valid_queries, D,
                              packed);
      load_tile<kQ, kHeadDim>(douts, L::ld_qkv, dout_tokens + dout_offset, out_row, valid_queries,
                              D, packed);
      load_lse<kQ>(lse_log2, lse + ((size_t)b * H + h) * T + q0, valid_queries);
      __syncthreads();
      compute_deltas<kQ>(deltas, douts, L::ld_qkv, out_tokens + dout_offset, out_row, valid_queries,
                         D);
      tile_product<kK, kQ, kHeadDim, false, true>(scores, L::ld_scores, keys, L::ld_qkv, queries,
                                                  L::ld_qkv);
      tile_product<kK, kQ, kHeadDim, false, true>(dprobs, L::ld_scores, values, L::ld_qkv, douts,
                                                  L::ld_qkv);
      __syncthreads();
      // P^T and dS^T = P^T (dP^T - delta) * scale; zero where key s is not
      // visible to query t (s > t, s before t's document, or t past T).
      for (int i = threadIdx.x; i < kK * kQ; i += kThreads) {
        const int c = i / kQ, r = i % kQ;
        const int s = k0 + c, t = q0 + r;
        float p = 0.0f, ds = 0.0f;
        if (s <= t && t < T && (!starts || s >= starts[t])) {
          p = exp2f(scores[c * L::ld_scores + r] * scale_log2 - lse_log2[r]);
          ds = p * (dprobs[c * L::ld_scores + r] - deltas[r]) * scale;
        }
        probs[c * L::ld_probs + r] = f32_to_element<Element>(p);
        dscores[c * L::ld_probs + r] = f32_to_element<Element>(ds);
      }
      __syncthreads();
      tile_product<kK, kHeadDim, kQ, true, false>(dvalues, L::ld_acc, probs, L::ld_probs, douts,
                                                  L::ld_qkv);
      tile_product<kK, kHeadDim, kQ, true, false>(dkeys, L::ld_acc, dscores, L::ld_probs, queries,
                                                  L::ld_qkv);
    }
  }
  __syncthreads();
  Storage* dkey_rows = dqkv + (size_t)b * T * row + key_offset;
  store_tile<kK, kHeadDim>(dkey_rows, row, dkeys, L::ld_acc, nullptr, valid_keys, D);
  store_tile<kK, kHeadDim>(dkey_rows + (size_t)KV * D, row, dvalues, L::ld_acc, nullptr, valid_keys,
                           D);
}

// Grid (query tiles, H, B): dQ of one query tile, summed over the key tiles up
// to the diagonal in order; the last (heaviest) tiles start first.
template <class Storage, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    attention_backward_q_kernel(Storage* dqkv, const Storage* dout, const Storage* qkv,
                                const Storage* out, const float* lse, const int32_t* doc_start,
                                AttentionDims dims, bool packed) {
  using Cfg = Tiles<Storage, kHeadDim>;
  using Element = typename Cfg::Element;
  using L = DqLayout<Storage, kHeadDim>;
  constexpr int kQ = L::kQ, kK = L::kK;
  LLM_DYNAMIC_SHARED(unsigned char, shared);
  Element* queries = reinterpret_cast<Element*>(shared + L::queries);
  Element* douts = reinterpret_cast<Element*>(shared + L::douts);
  Element* keys = reinterpret_cast<Element*>(shared + L::keys);
  Element* values = reinterpret_cast<Element*>(shared + L::values);
  float* dqueries = reinterpret_cast<float*>(shared + L::dqueries);
  float* scores = reinterpret_cast<float*>(shared + L::scores);
  float* dprobs = reinterpret_cast<float*>(shared + L::dprobs);
  Element* dscores = reinterpret_cast<Element*>(shared + L::dscores);
  float* lse_log2 = reinterpret_cast<float*>(shared + L::lse_log2);
  float* deltas = reinterpret_cast<float*>(shared + L::deltas);

  const int T = dims.T, H = dims.H, KV = dims.KV, D = dims.D;
  const int h = blockIdx.y, b = blockIdx.z, g = h / (H / KV);
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kQ, valid_queries = min(kQ, T - q0);
  const size_t row = dims.qkv_row(), out_row = dims.out_row();
  const Storage* tokens = qkv + (size_t)b * T * row;
  const float scale = dims.scale, scale_log2 = dims.scale * kLog2e;

  const size_t query_offset = (size_t)q0 * row + (size_t)h * D;
  const size_t dout_offset = ((size_t)b * T + q0) * out_row + (size_t)h * D;
  load_tile<kQ, kHeadDim>(queries, L::ld_qkv, tokens + query_offset, row, valid_queries, D, packed);
  load_tile<kQ, kHeadDim>(douts, L::ld_qkv, dout + dout_offset, out_row, valid_queries, D, packed);
  load_lse<kQ>(lse_log2, lse + ((size_t)b * H + h) * T + q0, valid_queries);
  zero_tile(dqueries, kQ * L::ld_acc);
  __syncthreads();
  compute_deltas<kQ>(deltas, douts, L::ld_qkv, out + dout_offset, out_row, valid_queries, D);

  const int32_t* starts = doc_start ? doc_start + (size_t)b * T : nullptr;
  const int key_tiles = (q0 + valid_queries - 1) / kK + 1;
  for (int kt = starts ? starts[q0] / kK : 0; kt < key_tiles; kt++) {
    const int k0 = kt * kK;
    __syncthreads();  // the previous tile's K and dS are no longer read
    const Storage* key_rows = tokens + (size_t)k0 * row + (size_t)(H + g) * D;
    load_tile<kK, kHeadDim>(keys, L::ld_qkv, key_rows, row, min(kK, T - k0), D, packed);
    load_tile<kK, kHeadDim>(values, L::ld_qkv, key_rows + (size_t)KV * D, row, min(kK, T - k0), D,
                            packed);
    __syncthreads();
    tile_product<kQ, kK, kHeadDim, false, true>(scores, L::ld_scores, queries, L::ld_qkv, keys,
                                                L::ld_qkv);
    tile_product<kQ, kK, kHeadDim, false, true>(dprobs, L::ld_scores, douts, L::ld_qkv, values,
                                                L::ld_qkv);
    __syncthreads();
    for (int i = threadIdx.x; i < kQ * kK; i += kThreads) {
      const int r = i / kK, c = i % kK;
      const int t = q0 + r, s = k0 + c;
      float ds = 0.0f;
      if (s <= t && t < T && (!starts || s >= starts[t])) {
        const float p = exp2f(scores[r * L::ld_scores + c] * scale_log2 - lse_log2[r]);
        ds = p * (dprobs[r * L::ld_scores + c] - deltas[r]) * scale;
      }
      dscores[r * L::ld_probs + c] = f32_to_element<Element>(ds);
    }
    __syncthreads();
    tile_product<kQ, kHeadDim, kK, true, false>(dqueries, L::ld_acc, dscores, L::ld_probs, keys,
                                                L::ld_qkv);
  }
  __syncthreads();
  store_tile<kQ, kHeadDim>(dqkv + (size_t)b * T * row + query_offset, row, dqueries, L::ld_acc,
                           nullptr, valid_queries, D);
}

// ---- launchers -----------------------------------------------------------------------

// Throws, naming the op and the value, on shapes the kernels do not take.
void check_shape(const char* op, int H, int KV, int D) {
  char message[200];
  if (D < 1 || D > kMaxHeadDim) {
    std::snprintf(message, sizeof message,
                  "head dim D=%d is not supported by the CUDA attention kernels (1 <= D <= %d)", D,
                  kMaxHeadDim);
    throw_cuda_error(op, message, __FILE__, __LINE__);
  }
  if (H < 1 || KV < 1 || H % KV != 0) {
    std::snprintf(message, sizeof message,
                  "H=%d query heads do not split into groups over KV=%d kv heads", H, KV);
    throw_cuda_error(op, message, __FILE__, __LINE__);
  }
}

// Calls f(std::integral_constant<int, P>) with P the padded head dim for D.
template <class F>
void with_padded_head_dim(int D, F&& f) {
  if (D <= 16)
    f(std::integral_constant<int, 16>{});
  else if (D <= 32)
    f(std::integral_constant<int, 32>{});
  else if (D <= 64)
    f(std::integral_constant<int, 64>{});
  else
    f(std::integral_constant<int, 128>{});
}

// 16-byte loads of every row need D to be a whole number of 16-byte packs and
// 16-byte aligned tensors (then every row start is aligned too).
template <class Storage>
bool packs_fit(int D, const void* a, const void* b) {
  return D % kPack<Storage> == 0 && is_aligned(a, 16) && is_aligned(b, 16);
}

template <class Kernel>
void allow_shared_bytes(Kernel kernel, size_t bytes) {
  LLM_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

}  // namespace

template <class Storage>
void attention_forward(Storage* out, float* lse, const Storage* qkv, const int32_t* doc_start,
                       int B, int T, int H, int KV, int D) {
  check_shape("attention_forward", H, KV, D);
  if (B <= 0 || T <= 0) return;
  const AttentionDims dims{B, T, H, KV, D, 1.0f / std::sqrt((float)D)};
  const bool packed = packs_fit<Storage>(D, qkv, qkv);
  with_padded_head_dim(D, [&](auto padded) {
    constexpr int kHeadDim = decltype(padded)::value;
    using L = ForwardLayout<Storage, kHeadDim>;
    const auto kernel = attention_forward_kernel<Storage, kHeadDim>;
    allow_shared_bytes(kernel, L::bytes);
    const dim3 grid(blocks_for(T, L::kQ), H, B);
    launch(kernel, grid, kThreads, L::bytes, compute_stream(), out, lse, qkv, doc_start, dims,
           packed);
    LLM_CUDA_CHECK_LAUNCH();
  });
}

template <class Storage>
void attention_backward(Storage* dqkv, const Storage* dout, const Storage* qkv, const Storage* out,
                        const float* lse, const int32_t* doc_start, int B, int T, int H, int KV,
                        int D) {
  check_shape("attention_backward", H, KV, D);
  if (B <= 0 || T <= 0) return;
  const AttentionDims dims{B, T, H, KV, D, 1.0f / std::sqrt((float)D)};
  const bool packed = packs_fit<Storage>(D, qkv, dout);
  with_padded_head_dim(D, [&](auto padded) {
    constexpr int kHeadDim = decltype(padded)::value;
    // The two kernels write disjoint parts of dqkv (k, v and q heads).
    using KvL = KvLayout<Storage, kHeadDim>;
    const auto kv_kernel = attention_backward_kv_kernel<Storage, kHeadDim>;
    allow_shared_bytes(kv_kernel, KvL::bytes);
    launch(kv_kernel, dim3(blocks_for(T, KvL::kK), KV, B), kThreads, KvL::bytes, compute_stream(),
           dqkv, dout, qkv, out, lse, doc_start, dims, packed);
    LLM_CUDA_CHECK_LAUNCH();
    using QL = DqLayout<Storage, kHeadDim>;
    const auto q_kernel = attention_backward_q_kernel<Storage, kHeadDim>;
    allow_shared_bytes(q_kernel, QL::bytes);
    launch(q_kernel, dim3(blocks_for(T, QL::kQ), H, B), kThreads, QL::bytes, compute_stream(), dqkv,
           dout, qkv, out, lse, doc_start, dims, packed);
    LLM_CUDA_CHECK_LAUNCH();
  });
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(attention_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(attention_backward);

}  // namespace llm::cuda
