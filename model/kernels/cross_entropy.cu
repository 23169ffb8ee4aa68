// Cross-entropy of the LM head on the GPU, optionally fused with its gradient
// (the logits buffer is overwritten by dlogits, no softmax buffer). One block
// per row; each thread walks the row keeping an online (max, sum of
// exp(x - max)), the block combines those in a fixed tree, so a row is read
// once for the loss and once more for the gradient, for any vocabulary size.
// Invariants: fp32 math for fp32 and bf16 logits; every exponent is of
// x - max <= 0, so logits of any magnitude give finite losses; each dlogit is
// (softmax - onehot) * dloss formed in fp32 and rounded once to its storage
// type; reductions have a fixed order (same inputs, same bits).
#include <cfloat>

#include "runtime/cuda_kernel_helpers.cuh"
#include "runtime/cuda_runtime.cuh"
#include "model/kernels/cross_entropy.h"

namespace llm::cuda {

namespace {

constexpr int kThreads = 512;  // per row: 16 warps, enough loads in flight for a 32K-128K row

// A running max and sum of exp(x - max) over part of a row. The empty part is
// {-FLT_MAX, 0} rather than -inf, so combining never forms -inf - -inf (NaN).
struct MaxSum {
  float max;
  float sum;
};

// ---- kernels ------------------------------------------------------------------

// The lane exchange of warp_reduce for a MaxSum.
__device__ __forceinline__ MaxSum shuffle_xor(MaxSum part, int lane_mask) {
  return {cuda::shuffle_xor(part.max, lane_mask), cuda::shuffle_xor(part.sum, lane_mask)};
}

// Two parts of a row as one; commutative bit for bit (fmaxf and + are), as
// block_reduce needs, with {-FLT_MAX, 0} as the identity.
struct MergeMaxSum {
  __device__ __forceinline__ MaxSum operator()(MaxSum a, MaxSum b) const {
    const float max = fmaxf(a.max, b.max);
    return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
  }
};

__device__ __forceinline__ MaxSum add_logit(MaxSum run, float x) {
  // One exponential per logit: rescale the sum only when the max moves.
  if (x > run.max) return {x, run.sum * expf(run.max - x) + 1.0f};
  return {run.max, run.sum + expf(x - run.max)};
}

// Block n: losses[n] = logsumexp(logits[n]) - logits[n][target]; with
// kWithGradient, dlogits[n] (which may be logits[n]) = (softmax - onehot) * dloss.
template <class T, bool kWithGradient>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_rows_kernel(float* losses, const T* logits, T* dlogits, const int32_t* targets,
                              int V, float dloss) {
  const size_t row_start = (size_t)blockIdx.x * V;
  const T* row = logits + row_start;
  const int target = targets[blockIdx.x];
  // Read before block_reduce's barrier, so before any thread overwrites the row.
  const float target_logit = load_f32(row + target);

  MaxSum part{-FLT_MAX, 0.0f};
  for (int v = threadIdx.x; v < V; v += kThreads) part = add_logit(part, load_f32(row + v));
  const MaxSum total = block_reduce(part, MaxSum{-FLT_MAX, 0.0f}, MergeMaxSum{});

  if (threadIdx.x == 0)
    losses[blockIdx.x] = (float)((double)total.max + log((double)total.sum) - target_logit);

  if constexpr (kWithGradient) {
    T* drow = dlogits + row_start;
    const float scale = (float)(dloss / (double)total.sum);  // softmax = exp(x - max) / sum
    for (int v = threadIdx.x; v < V; v += kThreads) {
      float grad = expf(load_f32(row + v) - total.max) * scale;
      if (v == target) grad -= dloss;
      store_f32(drow + v, grad);
    }
  }
}

// ---- launchers ----------------------------------------------------------------

template <bool kWithGradient, class T>
void launch_rows(float* losses, const T* logits, T* dlogits, const int32_t* targets, int N, int V,
                 float dloss) {
  if (N <= 0) return;
  cross_entropy_rows_kernel<T, kWithGradient>
      <<<N, kThreads, 0, compute_stream()>>>(losses, logits, dlogits, targets, V, dloss);
  LLM_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void cross_entropy_forward(float* losses, const T* logits, const int32_t* targets, int N, int V) {
  launch_rows<false>(losses, logits, static_cast<T*>(nullptr), targets, N, V, 0.0f);
}

template <class T>
void cross_entropy_forward_backward(float* losses, T* logits, const int32_t* targets, int N, int V,
                                    float dloss) {
  launch_rows<true>(losses, static_cast<const T*>(logits), logits, targets, N, V, dloss);
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(cross_entropy_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(cross_entropy_forward_backward);

}  // namespace llm::cuda
