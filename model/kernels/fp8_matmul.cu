// FP8 casts on the GPU: the amax and scale of a bf16 tensor, and its fp8
// codes and their transpose in one pass (the GEMM itself is matmul.cu's,
// through cuBLASLt).
// The amax is two kernels: a grid of at most kAmaxBlocks blocks each writes
// the largest bf16 magnitude bits of its grid-stride share into a partial,
// reading 16-byte packs where x is aligned for them; then one block reduces
// the partials and writes the Fp8Scale (fp8_scale_from_amax, the CPU twin's
// function). Maxima of integers are exact in any order, so the result is the
// CPU's bits, and a NaN (bits above every number's) gives the CPU's NaN amax.
// The cast reads each tile of x once, converts it (one fp32 multiply by the
// power-of-two scale, then cvt.rn.satfinite: __nv_cvt_float_to_fp8), writes
// the row-major codes and, through shared memory, the transposed ones, so
// Hopper's TN GEMMs of the backward get their K-contiguous operands without
// another pass. Where the shape and pointers allow, each thread moves runs of
// kCastRun elements (8-byte loads, 4-byte stores); else runs of one.
// Both were latency-bound with one 2-byte load per thread and step: on an
// H200 (2026-11-27) they took half of gpu_1b's FP8 step (docs/gpu.md).
// Invariant: the same bits as the CPU twin; no atomics, no host waits.
// Not fused (left for later): the amax into the kernels that produce the
// tensors (RMSNorm, SwiGLU), which would save the amax pass's read.
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
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

struct MaxBits {
  __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const {
    return a > b ? a : b;
  }
};

__device__ __forceinline__ __nv_fp8_interpretation_t interpretation(Fp8Format format) {
  return format == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2;
}

// ---- kernels --------------------------------------------------------------------

// The largest magnitude bits among a pack's elements, folded into `largest`.
template <int kWidth>
__device__ __forceinline__ uint32_t max_magnitude_bits(uint32_t largest,
                                                       const Pack<Bf16, kWidth>& pack) {
#pragma unroll
  for (int j = 0; j < kWidth; j++)
    largest = MaxBits{}(largest, (uint32_t)(pack.v[j].bits & 0x7fffu));
  return largest;
}

// partials[blockIdx.x] = the largest magnitude bits of this block's share of
// x: the first `packs` 16-byte packs, then the elements after them.
__global__ void amax_partials_kernel(uint32_t* partials, const Bf16* x, size_t n, size_t packs) {
  uint32_t largest = 0;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const auto* packed = reinterpret_cast<const Pack<Bf16>*>(x);
  for (size_t i = first; i < packs; i += stride) largest = max_magnitude_bits(largest, packed[i]);
  for (size_t i = packs * kPack<Bf16> + first; i < n; i += stride)
    largest = MaxBits{}(largest, (uint32_t)(x[i].bits & 0x7fffu));
  largest = block_reduce(largest, 0u, MaxBits{});
  if (threadIdx.x == 0) partials[blockIdx.x] = largest;
}

// *scale from the largest of `count` partials (one block).
__global__ void amax_scale_kernel(Fp8Scale* scale, const uint32_t* partials, unsigned count,
                                  Fp8Format format) {
  uint32_t largest = 0;
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x)
    largest = MaxBits{}(largest, partials[i]);
  largest = block_reduce(largest, 0u, MaxBits{});
  if (threadIdx.x == 0) *scale = fp8_scale_from_amax(__uint_as_float(largest << 16), format);
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
  const __nv_fp8_interpretation_t kind = interpretation(format);
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
    for (int i = 0; i < kRun; i++)
      out.v[i] = __nv_cvt_float_to_fp8(load_f32(&in.v[i]) * s, __NV_SATFINITE, kind);
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
  auto* partials = static_cast<uint32_t*>(amax_partials().reserve(kAmaxBlocks * sizeof(uint32_t)));
  launch(amax_partials_kernel, blocks, kThreads, 0, compute_stream(), partials, x, n, packs);
  LLM_CUDA_CHECK_LAUNCH();
  launch(amax_scale_kernel, 1, kThreads, 0, compute_stream(), scale, partials, blocks, format);
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

}  // namespace llm::cuda
