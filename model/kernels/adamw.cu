// AdamW and the gradient squared-norm on the GPU.
// Invariants: adamw_update is elementwise with the CPU twin's formula in the
// same order (bias corrections computed on the host exactly as there), so a
// shard gets the same bits as the whole and results match the CPU to ~1 ulp
// (FMA contraction may differ between compilers); its optional bf16 copy is
// the updated param rounded by store_f32, as cast_f32_to_bf16 does.
// sum_squares sums in double over a grid that depends only on n, then adds the
// per-block partials in a fixed order in a second single-block pass that
// writes the device result: the same input gives the same bits run after run,
// and nothing waits for the host (a caller reads back once, when it needs
// the value).
#include <algorithm>
#include <cmath>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/adamw.h"

namespace llm::cuda {

namespace {

constexpr unsigned kAdamThreads = 256;
constexpr unsigned kMaxAdamBlocks = 1u << 20;  // grid-stride beyond ~268M elements

constexpr unsigned kSumThreads = 512;
// Fixed upper bound on the first pass's grid (plenty to fill an H100 with
// 512-thread blocks); also the partials the scratch holds, so it never grows.
constexpr unsigned kMaxSumBlocks = 1024;
constexpr size_t kMinFloatsPerSumThread = 8;  // small inputs use fewer blocks

// ---- kernels ------------------------------------------------------------------

__global__ void adamw_kernel(float* params, Bf16* params_bf16, const float* grads, float* m,
                             float* v, size_t n, float lr, float beta1, float beta2, float eps,
                             float weight_decay, float grad_scale, float bias_correction1,
                             float bias_correction2) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float g = grads[i] * grad_scale;
    const float m_i = beta1 * m[i] + (1.0f - beta1) * g;
    const float v_i = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = m_i;
    v[i] = v_i;
    const float m_hat = m_i / bias_correction1;
    const float v_hat = v_i / bias_correction2;
    params[i] -= lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * params[i]);
    if (params_bf16 != nullptr) store_f32(params_bf16 + i, params[i]);
  }
}

// partials[block] = sum of x[i]^2 over the block's grid-stride share (each
// square of a float is exact in double).
__global__ void __launch_bounds__(kSumThreads)
    sum_squares_partials_kernel(double* partials, const float* x, size_t n) {
  double sum = 0.0;
  for (size_t i = (size_t)blockIdx.x * kSumThreads + threadIdx.x; i < n;
       i += (size_t)gridDim.x * kSumThreads) {
    const double xi = x[i];
    sum += xi * xi;
  }
  const double block_total = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = block_total;
}

// *total = partials[0] + ... + partials[count - 1], one block, fixed order
// (0 when count is 0).
__global__ void __launch_bounds__(kSumThreads)
    sum_partials_kernel(double* total, const double* partials, unsigned count) {
  double sum = 0.0;
  for (unsigned i = threadIdx.x; i < count; i += kSumThreads) sum += partials[i];
  const double block_total = block_sum(sum);
  if (threadIdx.x == 0) *total = block_total;
}

// ---- launchers ----------------------------------------------------------------

// kMaxSumBlocks partials, reused by every call (they are queued on one
// stream). Allocated on first use, kept for the process (freeing at exit could
// race the CUDA context's teardown).
double* sum_scratch() {
  static double* scratch = [] {
    double* p = nullptr;
    LLM_CUDA_CHECK(cudaMalloc(&p, kMaxSumBlocks * sizeof(double)));
    return p;
  }();
  return scratch;
}

}  // namespace

void adamw_update(float* params, Bf16* params_bf16, const float* grads, float* m, float* v,
                  size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                  float grad_scale, int t) {
  if (n == 0) return;
  const float bias_correction1 = (float)(1.0 - std::pow((double)beta1, t));
  const float bias_correction2 = (float)(1.0 - std::pow((double)beta2, t));
  const unsigned blocks = std::min(blocks_for(n, kAdamThreads), kMaxAdamBlocks);
  launch(adamw_kernel, blocks, kAdamThreads, 0, compute_stream(), params, params_bf16, grads, m, v,
         n, lr, beta1, beta2, eps, weight_decay, grad_scale, bias_correction1, bias_correction2);
  LLM_CUDA_CHECK_LAUNCH();
}

void sum_squares(double* result, const float* x, size_t n) {
  // A function of n alone (not of the device), so the summation order is too.
  const unsigned blocks =
      n == 0 ? 0 : std::min(blocks_for(n, kSumThreads * kMinFloatsPerSumThread), kMaxSumBlocks);
  double* partials = sum_scratch();
  if (blocks > 0) {
    launch(sum_squares_partials_kernel, blocks, kSumThreads, 0, compute_stream(), partials, x, n);
    LLM_CUDA_CHECK_LAUNCH();
  }
  launch(sum_partials_kernel, 1, kSumThreads, 0, compute_stream(), result, partials, blocks);
  LLM_CUDA_CHECK_LAUNCH();
}

}  // namespace llm::cuda
