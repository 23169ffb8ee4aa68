// fp32 <-> bf16 buffer conversions on the GPU: one grid-stride kernel per
// direction, four elements per thread with vector loads and stores when both
// buffers are aligned for them, element by element otherwise.
// Invariant: elementwise, f32 -> bf16 rounds to nearest even (store_f32, as
// float_to_bf16 on the host; a NaN stays a NaN, its payload may differ) and
// bf16 -> f32 is exact, so any slice converts to the same bits as the whole.
#include <algorithm>
#include <cstdint>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/cast.h"

namespace llm::cuda {

namespace {

constexpr unsigned kThreads = 256;
// Enough blocks to fill an H100 several times over; larger buffers loop.
constexpr unsigned kMaxBlocks = 4096;
constexpr int kWidth = 4;  // elements per vector access: 16 bytes of fp32, 8 of bf16

// ---- kernels --------------------------------------------------------------------

// out[i] = in[i] converted through fp32. With kVectorized, packs of kWidth
// elements move with one access each and the threads of the grid finish the
// n % kWidth tail element by element; without, everything goes element by element.
template <class Out, class In, bool kVectorized>
__global__ void convert_kernel(Out* out, const In* in, size_t n) {
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t scalar_from = 0;
  if constexpr (kVectorized) {
    const size_t n_packs = n / kWidth;
    for (size_t p = first; p < n_packs; p += stride) {
      const Pack<In, kWidth> src = reinterpret_cast<const Pack<In, kWidth>*>(in)[p];
      Pack<Out, kWidth> dst;
#pragma unroll
      for (int k = 0; k < kWidth; k++) store_f32(&dst.v[k], load_f32(&src.v[k]));
      reinterpret_cast<Pack<Out, kWidth>*>(out)[p] = dst;
    }
    scalar_from = n_packs * kWidth;
  }
  for (size_t i = scalar_from + first; i < n; i += stride) store_f32(out + i, load_f32(in + i));
}

// ---- launchers ------------------------------------------------------------------

template <class Out, class In>
void convert(Out* out, const In* in, size_t n) {
  if (n == 0) return;
  const bool vectorized =
      is_aligned(out, sizeof(Pack<Out, kWidth>)) && is_aligned(in, sizeof(Pack<In, kWidth>));
  const size_t work = vectorized ? (n + kWidth - 1) / kWidth : n;
  const unsigned blocks = std::min(blocks_for(work, kThreads), kMaxBlocks);
  if (vectorized) {
    launch(convert_kernel<Out, In, true>, blocks, kThreads, 0, compute_stream(), out, in, n);
  } else {
    launch(convert_kernel<Out, In, false>, blocks, kThreads, 0, compute_stream(), out, in, n);
  }
  LLM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void cast_f32_to_bf16(Bf16* out, const float* in, size_t n) { convert(out, in, n); }

void cast_bf16_to_f32(float* out, const Bf16* in, size_t n) { convert(out, in, n); }

}  // namespace llm::cuda
