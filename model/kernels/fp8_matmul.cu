// FP8 casts on the GPU: the amax and scale of a bf16 tensor, and its fp8
// codes and their transpose in one pass (the GEMM itself is matmul.cu's,
// through cuBLASLt).
// The amax is two kernels: a grid of at most kAmaxBlocks blocks each writes
// the largest magnitude of its grid-stride share into a partial, reading
// 16-byte packs where x is aligned for them; then one block reduces the
// partials and writes the Fp8Scale (fp8_scale_from_amax, the CPU twin's
// function). The second kernel alone makes the scale from the row amaxes an
// RMSNorm or SwiGLU forward wrote (fp8_scale_from_row_amax). Maxima of
// magnitude bits (fp8_amax_device.cuh) are exact in any order, so the result
// is the CPU's bits, and a NaN (bits above every number's) gives the CPU's
// NaN amax. Delayed scaling's fp8_cast_amax is the amax pass's first kernel
// writing each element's code beside its maximum (16-byte loads, 8-byte
// stores where aligned); a one-block kernel then folds the partials into the
// running amax (fp8_amax_fold, which also folds a producer's row amaxes).
// The cast reads each tile of x once, converts it (one fp32 multiply by the
// power-of-two scale, then cvt.rn.satfinite: __nv_cvt_float_to_fp8), writes
// the row-major codes and, through shared memory, the transposed ones, so
// Hopper's TN GEMMs of the backward get their K-contiguous operands without
// another pass. Where the shape and pointers allow, each thread moves runs of
// kCastRun elements (8-byte loads, 4-byte stores); else runs of one.
// Both were latency-bound with one 2-byte load per thread and step: on an
// H200 (2026-11-27) they took half of gpu_1b's FP8 step (docs/gpu.md).
// Invariant: the same bits as the CPU twin; no atomics, no host waits.
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/fp8_amax_device.cuh"
#include "model/kernels/fp8_matmul.h"

namespace llm::cuda {

namespace {

constexpr unsigned kThreads = 256;
// Eight blocks of kThreads per SM of an H100 or H200 (132 SMs): enough 16-byte
// loads in flight to keep HBM busy; each block leaves one partial maximum.
constexpr unsigned kAmaxBlocks = 8 * 132;
// The cast: a block of kCastThreads x kCastThreads threads covers a square
// tile of kCastThreads * run elements a side; each thread converts `run`
// rows of `run` consecutive elements, then writes `run` transposed runs.
constexpr int kCastThreads = 16;
constexpr int kCastRun = 4;

// ---- kernels --------------------------------------------------------------------

// The largest magnitude bits among a pack's elements, folded into `largest`.
template <int kWidth>
__device__ __forceinline__ uint32_t max_magnitude_bits(uint32_t largest,
                                                       const Pack<Bf16, kWidth>& pack) {
#pragma unroll
  for (int j = 0; j < kWidth; j++) largest = MaxBits{}(largest, magnitude_bits(pack.v[j]));
  return largest;
}

// partials[blockIdx.x] = the largest magnitude of this block's share of x:
// the first `packs` 16-byte packs, then the elements after them.
__global__ void amax_partials_kernel(float* partials, const Bf16* x, size_t n, size_t packs) {
  uint32_t largest = 0;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const auto* packed = reinterpret_cast<const Pack<Bf16>*>(x);
  for (size_t i = first; i < packs; i += stride) largest = max_magnitude_bits(largest, packed[i]);
  for (size_t i = packs * kPack<Bf16> + first; i < n; i += stride)
    largest = MaxBits{}(largest, magnitude_bits(x[i]));
  write_block_amax(partials + blockIdx.x, largest);
}

// *scale from the largest of `count` amaxes (one block).
__global__ void amax_scale_kernel(Fp8Scale* scale, const float* amaxes, size_t count,
                                  Fp8Format format) {
  uint32_t largest = 0;
  for (size_t i = threadIdx.x; i < count; i += blockDim.x)
    largest = MaxBits{}(largest, magnitude_bits(amaxes[i]));
  largest = block_reduce(largest, 0u, MaxBits{});
  if (threadIdx.x == 0) *scale = fp8_scale_from_amax(__uint_as_float(largest), format);
}

// codes[i] = fp8(x[i] * scale) over a grid-stride share of x (n), the first
// `packs` 16-byte packs of x (8-byte packs of codes) and then the elements
// after them, and partials[blockIdx.x] = the largest magnitude of that share.
__global__ void cast_amax_kernel(uint8_t* codes, float* partials, const Bf16* x, size_t n,
                                 size_t packs, const Fp8Scale* scale, Fp8Format format) {
  using Codes = Pack<uint8_t, kPack<Bf16>>;
  const float s = scale->scale;
  uint32_t largest = 0;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const auto* packed = reinterpret_cast<const Pack<Bf16>*>(x);
  for (size_t i = first; i < packs; i += stride) {
    const Pack<Bf16> in = packed[i];
    Codes out;
#pragma unroll
    for (int j = 0; j < kPack<Bf16>; j++) out.v[j] = fp8_code(load_f32(&in.v[j]), s, format);
    reinterpret_cast<Codes*>(codes)[i] = out;
    largest = max_magnitude_bits(largest, in);
  }
  for (size_t i = packs * kPack<Bf16> + first; i < n; i += stride) {
    largest = MaxBits{}(largest, magnitude_bits(x[i]));
    codes[i] = fp8_code(load_f32(&x[i]), s, format);
  }
  write_block_amax(partials + blockIdx.x, largest);
}

// *amax = the largest of *amax and `count` amaxes (one block).
__global__ void amax_fold_kernel(float* amax, const float* amaxes, size_t count) {
  uint32_t largest = 0;
  for (size_t i = threadIdx.x; i < count; i += blockDim.x)
    largest = MaxBits{}(largest, magnitude_bits(amaxes[i]));
  largest = block_reduce(largest, 0u, MaxBits{});
  if (threadIdx.x == 0) *amax = __uint_as_float(MaxBits{}(largest, magnitude_bits(*amax)));
}

// One tile of x (rows, cols), kCastThreads * kRun elements a side: codes
// (row-major, when not null) and codes_t (cols, rows) (when not null). Block
// (kCastThreads, kCastThreads); grid (column tiles, row tiles). kRun > 1
// needs rows and cols multiples of kRun and x, codes, codes_t aligned to
// their runs (fp8_cast_transpose checks), so a run is wholly in or out.
template <int kRun>
__global__ void cast_transpose_kernel(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows,
                                      int cols, const Fp8Scale* scale, Fp8Format format) {
  constexpr int kSide = kCastThreads * kRun;
  // Rows padded by 4 bytes: a run stays 4-byte aligned (the words' alignment),
  // and the transposed reads down a column spread over the banks.
  __shared__ uint32_t tile_words[kSide * (kSide + 4) / 4];
  auto* tile = reinterpret_cast<uint8_t(*)[kSide + 4]>(tile_words);
  using Codes = Pack<uint8_t, kRun>;
  const float s = scale->scale;
  const int row0 = blockIdx.y * kSide, col0 = blockIdx.x * kSide;
  const int col = col0 + threadIdx.x * kRun;
#pragma unroll
  for (int j = 0; j < kRun; j++) {
    const int dy = threadIdx.y + j * kCastThreads, row = row0 + dy;
    if (row >= rows || col >= cols) continue;
    const size_t at = (size_t)row * cols + col;
    const Pack<Bf16, kRun> in = *reinterpret_cast<const Pack<Bf16, kRun>*>(x + at);
    Codes out;
#pragma unroll
    for (int i = 0; i < kRun; i++) out.v[i] = fp8_code(load_f32(&in.v[i]), s, format);
    if (codes) *reinterpret_cast<Codes*>(codes + at) = out;
    *reinterpret_cast<Codes*>(&tile[dy][threadIdx.x * kRun]) = out;
  }
  if (!codes_t) return;  // the same for every thread of the grid
  __syncthreads();
  // Transposed: codes_t row col0 + c holds tile column c; this thread writes
  // its run of tile rows threadIdx.x * kRun.., each written above by the
  // thread whose bounds check was the same.
  const int row_t = row0 + threadIdx.x * kRun;
#pragma unroll
  for (int j = 0; j < kRun; j++) {
    const int c = threadIdx.y + j * kCastThreads;
    if (col0 + c >= cols || row_t >= rows) continue;
    Codes out;
#pragma unroll
    for (int i = 0; i < kRun; i++) out.v[i] = tile[threadIdx.x * kRun + i][c];
    *reinterpret_cast<Codes*>(codes_t + (size_t)(col0 + c) * rows + row_t) = out;
  }
}

// ---- launchers ------------------------------------------------------------------

GrowingScratch& amax_partials() {
  static GrowingScratch* partials = new GrowingScratch();  // never freed, as cuBLASLt's state
  return *partials;
}

}  // namespace

void fp8_amax_scale(Fp8Scale* scale, const Bf16* x, size_t n, Fp8Format format) {
  const size_t packs = is_aligned(x, sizeof(Pack<Bf16>)) ? n / kPack<Bf16> : 0;
  const unsigned blocks =
      std::min(blocks_for(packs + (n - packs * kPack<Bf16>), kThreads), kAmaxBlocks);
  auto* partials = static_cast<float*>(amax_partials().reserve(kAmaxBlocks * sizeof(float)));
  launch(amax_partials_kernel, blocks, kThreads, 0, compute_stream(), partials, x, n, packs);
  LLM_CUDA_CHECK_LAUNCH();
  launch(amax_scale_kernel, 1, kThreads, 0, compute_stream(), scale, partials, (size_t)blocks,
         format);
  LLM_CUDA_CHECK_LAUNCH();
}

void fp8_scale_from_row_amax(Fp8Scale* scale, const float* row_amax, int rows, Fp8Format format) {
  launch(amax_scale_kernel, 1, kThreads, 0, compute_stream(), scale, row_amax,
         (size_t)std::max(rows, 0), format);
  LLM_CUDA_CHECK_LAUNCH();
}

void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                        const Fp8Scale* scale, Fp8Format format) {
  if (rows <= 0 || cols <= 0 || (!codes && !codes_t)) return;
  const bool runs = rows % kCastRun == 0 && cols % kCastRun == 0 &&
                    is_aligned(x, kCastRun * sizeof(Bf16)) && is_aligned(codes, kCastRun) &&
                    is_aligned(codes_t, kCastRun);
  const int side = kCastThreads * (runs ? kCastRun : 1);
  const dim3 grid(blocks_for(cols, side), blocks_for(rows, side));
  const dim3 block(kCastThreads, kCastThreads);
  if (runs)
    launch(cast_transpose_kernel<kCastRun>, grid, block, 0, compute_stream(), codes, codes_t, x,
           rows, cols, scale, format);
  else
    launch(cast_transpose_kernel<1>, grid, block, 0, compute_stream(), codes, codes_t, x, rows,
           cols, scale, format);
  LLM_CUDA_CHECK_LAUNCH();
}

void fp8_cast_amax(uint8_t* codes, float* amax, const Bf16* x, size_t n, const Fp8Scale* scale,
                   Fp8Format format) {
  if (n == 0) return;
  const bool aligned = is_aligned(x, sizeof(Pack<Bf16>)) && is_aligned(codes, kPack<Bf16>);
  const size_t packs = aligned ? n / kPack<Bf16> : 0;
  const unsigned blocks =
      std::min(blocks_for(packs + (n - packs * kPack<Bf16>), kThreads), kAmaxBlocks);
  auto* partials = static_cast<float*>(amax_partials().reserve(kAmaxBlocks * sizeof(float)));
  launch(cast_amax_kernel, blocks, kThreads, 0, compute_stream(), codes, partials, x, n, packs,
         scale, format);
  LLM_CUDA_CHECK_LAUNCH();
  fp8_amax_fold(amax, partials, static_cast<int>(blocks));
}

void fp8_amax_fold(float* amax, const float* amaxes, int count) {
  launch(amax_fold_kernel, 1, kThreads, 0, compute_stream(), amax, amaxes,
         (size_t)std::max(count, 0));
  LLM_CUDA_CHECK_LAUNCH();
}

}  // namespace llm::cuda
