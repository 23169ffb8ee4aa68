// FP8 casts on the GPU: the amax and scale of a bf16 tensor, and its fp8
// codes and their transpose in one pass (the GEMM itself is matmul.cu's,
// through cuBLASLt).
// The amax is two kernels: a grid of kAmaxBlocks blocks each writes the
// largest bf16 magnitude bits of its grid-stride share into a partial, then
// one block reduces the partials and writes the Fp8Scale (fp8_scale_from_amax,
// the CPU twin's function). Maxima of integers are exact in any order, so the
// result is the CPU's bits, and a NaN (bits above every number's) gives the
// CPU's NaN amax. The cast reads each 32 x 32 tile of x once, converts it
// (one fp32 multiply by the power-of-two scale, then cvt.rn.satfinite:
// __nv_cvt_float_to_fp8), writes the row-major codes and, through shared
// memory, the transposed ones, so Hopper's TN GEMMs of the backward get their
// K-contiguous operands without another pass.
// Invariant: the same bits as the CPU twin; no atomics, no host waits.
// Not fused (left for later): the amax into the kernels that produce the
// tensors (RMSNorm, SwiGLU), which would save the amax pass's read.
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "runtime/cuda_kernel_helpers.cuh"
#include "runtime/cuda_runtime.cuh"
#include "model/kernels/fp8_matmul.h"

namespace llm::cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kAmaxBlocks = 264;  // two per H100 SM; each a partial maximum
constexpr int kTile = 32;              // the cast's tile: kTile x kTile elements
constexpr int kTileRows = 8;           // threads per tile column: a block is kTile x kTileRows

struct MaxBits {
  __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const {
    return a > b ? a : b;
  }
};

__device__ __forceinline__ __nv_fp8_interpretation_t interpretation(Fp8Format format) {
  return format == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2;
}

// ---- kernels --------------------------------------------------------------------

// partials[blockIdx.x] = the largest magnitude bits of this block's share of x.
__global__ void amax_partials_kernel(uint32_t* partials, const Bf16* x, size_t n) {
  uint32_t largest = 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
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

// One kTile x kTile tile of x (rows, cols): codes (row-major, when not null)
// and codes_t (cols, rows) (when not null). Block (kTile, kTileRows); grid
// (column tiles, row tiles).
__global__ void cast_transpose_kernel(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows,
                                      int cols, const Fp8Scale* scale, Fp8Format format) {
  __shared__ uint8_t tile[kTile][kTile + 4];
  const float s = scale->scale;
  const int col = blockIdx.x * kTile + threadIdx.x;
  for (int dy = threadIdx.y; dy < kTile; dy += kTileRows) {
    const int row = blockIdx.y * kTile + dy;
    if (row >= rows || col >= cols) continue;
    const size_t at = (size_t)row * cols + col;
    const uint8_t code =
        __nv_cvt_float_to_fp8(load_f32(x + at) * s, __NV_SATFINITE, interpretation(format));
    if (codes) codes[at] = code;
    tile[dy][threadIdx.x] = code;
  }
  if (!codes_t) return;  // the same for every thread of the grid
  __syncthreads();
  // Transposed: row blockIdx.x * kTile + dy of codes_t, column blockIdx.y *
  // kTile + threadIdx.x; its code was written above by the thread of the same
  // bounds check.
  const int row_t = blockIdx.y * kTile + threadIdx.x;
  for (int dy = threadIdx.y; dy < kTile; dy += kTileRows) {
    const int col_t = blockIdx.x * kTile + dy;
    if (col_t < cols && row_t < rows) codes_t[(size_t)col_t * rows + row_t] = tile[threadIdx.x][dy];
  }
}

// ---- launchers ------------------------------------------------------------------

GrowingScratch& amax_partials() {
  static GrowingScratch* partials = new GrowingScratch();  // never freed, as cuBLASLt's state
  return *partials;
}

}  // namespace

void fp8_amax_scale(Fp8Scale* scale, const Bf16* x, size_t n, Fp8Format format) {
  const unsigned blocks = std::min(blocks_for(n, kThreads), kAmaxBlocks);
  auto* partials = static_cast<uint32_t*>(amax_partials().reserve(kAmaxBlocks * sizeof(uint32_t)));
  launch(amax_partials_kernel, blocks, kThreads, 0, compute_stream(), partials, x, n);
  LLM_CUDA_CHECK_LAUNCH();
  launch(amax_scale_kernel, 1, kThreads, 0, compute_stream(), scale, partials, blocks, format);
  LLM_CUDA_CHECK_LAUNCH();
}

void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                        const Fp8Scale* scale, Fp8Format format) {
  if (rows <= 0 || cols <= 0 || (!codes && !codes_t)) return;
  const dim3 grid(blocks_for(cols, kTile), blocks_for(rows, kTile));
  launch(cast_transpose_kernel, grid, dim3(kTile, kTileRows), 0, compute_stream(), codes, codes_t,
         x, rows, cols, scale, format);
  LLM_CUDA_CHECK_LAUNCH();
}

}  // namespace llm::cuda
