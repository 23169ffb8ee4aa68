// A bias on every row on the GPU (see row_bias.h). Forward: one thread per
// element in a grid-stride loop, fp32 math rounded once on store. Backward:
// one block per 32 consecutive columns; its warp w sums rows w, w + warps,
// ... of its lane's column (each warp reads 32 consecutive values of a row),
// then the block adds its warps' sums in warp order into dbias.
// Invariant: every sum's order depends on (N, C) alone, with no float atomics.
#include <algorithm>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/row_bias.h"

namespace llm::cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kMaxBlocks = 4096;  // larger matrices loop
constexpr unsigned kWarps = 16;        // backward: row phases per column

// ---- kernels --------------------------------------------------------------------

template <class T>
__global__ void row_bias_forward_kernel(T* x, const T* bias, size_t n, int C) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    store_f32(x + i, load_f32(x + i) + load_f32(bias + i % C));
}

template <class T>
__global__ void row_bias_backward_kernel(float* dbias, const T* dout, int N, int C) {
  __shared__ float sums[kWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int c = blockIdx.x * 32 + lane;
  float sum = 0.0f;
  if (c < C) {
    for (int n = warp; n < N; n += kWarps) sum += load_f32(dout + (size_t)n * C + c);
  }
  sums[warp][lane] = sum;
  __syncthreads();
  if (warp == 0 && c < C) {
    float total = 0.0f;
    for (int w = 0; w < (int)kWarps; w++) total += sums[w][lane];
    dbias[c] += total;
  }
}

}  // namespace

// ---- launchers ------------------------------------------------------------------

template <class T>
void row_bias_forward(T* x, const T* bias, int N, int C) {
  if (N <= 0 || C <= 0) return;
  const size_t n = (size_t)N * C;
  const unsigned blocks = std::min(blocks_for(n, kThreads), kMaxBlocks);
  launch(row_bias_forward_kernel<T>, blocks, kThreads, 0, compute_stream(), x, bias, n, C);
  LLM_CUDA_CHECK_LAUNCH();
}

template <class T>
void row_bias_backward(float* dbias, const T* dout, int N, int C) {
  if (N <= 0 || C <= 0) return;
  launch(row_bias_backward_kernel<T>, blocks_for((size_t)C, 32), kWarps * 32, 0, compute_stream(),
         dbias, dout, N, C);
  LLM_CUDA_CHECK_LAUNCH();
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(row_bias_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(row_bias_backward);

}  // namespace llm::cuda
