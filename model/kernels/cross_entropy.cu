// Cross-entropy of the LM head on the GPU over a vocabulary slice, in two
// kernels of one block per row (no softmax buffer):
//   partials: each thread walks the row keeping an online (max, sum of
//     exp(x - max)), the block combines those in a fixed tree and thread 0
//     writes the slice's logsumexp and the target logit (when in the slice);
//   combine: thread 0 combines the ranks' partials (in double) into the loss
//     and the row's logsumexp, which the block shares; with logits, every
//     thread then overwrites its logits by (exp(x - lse) - onehot) * dloss.
// Forward only (no logits), the combination is one thread per row. A row
// whose target is ignored (negative) has a loss of 0 and a zero gradient.
// A row is read once by the partials and once more (then written) for the
// gradient, for any vocabulary size.
// Invariants: fp32 math for fp32 and bf16 logits; every exponent is of
// x - max <= 0 or x - lse <= 0, so logits of any magnitude give finite
// losses; each dlogit is formed in fp32 and rounded once to its storage type;
// reductions have a fixed order (same inputs, same bits).
#include <cfloat>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/cross_entropy.h"

namespace llm::cuda {

namespace {

constexpr int kThreads = 512;  // per row: 16 warps, enough loads in flight for a 32K-128K row
constexpr int kLossRowsPerBlock = 256;  // rows per block of the forward-only combination

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

// The index of `target` in the slice starting at vocab_begin, or -1.
__device__ __forceinline__ int slice_index(int32_t target, int vocab_begin, int V_local) {
  const long long j = (long long)target - vocab_begin;
  return j >= 0 && j < V_local ? (int)j : -1;
}

// Block n: partials[2n] = logsumexp(logits[n]) (-inf for an empty slice),
// partials[2n + 1] = the target's logit when the slice holds it, else 0.
template <class T>
__global__ void __launch_bounds__(kThreads)
    partials_kernel(float* partials, const T* logits, const int32_t* targets, int V_local,
                    int vocab_begin) {
  const T* row = logits + (size_t)blockIdx.x * V_local;
  MaxSum part{-FLT_MAX, 0.0f};
  for (int v = threadIdx.x; v < V_local; v += kThreads) part = add_logit(part, load_f32(row + v));
  const MaxSum total = block_reduce(part, MaxSum{-FLT_MAX, 0.0f}, MergeMaxSum{});
  if (threadIdx.x != 0) return;
  const int j = slice_index(targets[blockIdx.x], vocab_begin, V_local);
  partials[2 * (size_t)blockIdx.x] =
      V_local > 0 ? (float)((double)total.max + log((double)total.sum)) : -INFINITY;
  partials[2 * (size_t)blockIdx.x + 1] = j >= 0 ? load_f32(row + j) : 0.0f;
}

// Row n's totals over the ranks' partials, as the CPU twin forms them: the
// logsumexp of the whole vocabulary (the largest slice logsumexp subtracted;
// empty slices, -inf, add nothing) and the target logit (one rank holds it).
struct RowTotals {
  double lse;
  double target_logit;
};
// Not inlined: the forward-only and the fused kernels run the very same code,
// so their losses are the same bits.
__device__ __noinline__ RowTotals combine_row(const float* partials, int n, int N, int ranks) {
  const size_t stride = 2 * (size_t)N;  // one rank's block of partials
  const float* row = partials + 2 * (size_t)n;
  double max = -INFINITY;
  for (int r = 0; r < ranks; r++) max = fmax(max, (double)row[r * stride]);
  double sum = 0.0, target_logit = 0.0;
  for (int r = 0; r < ranks; r++) {
    const double lse = row[r * stride];
    if (lse > -INFINITY) sum += exp(lse - max);
    target_logit += row[r * stride + 1];
  }
  return {max + log(sum), target_logit};
}

// Thread n: losses[n] from the partials alone (forward only); 0 for an
// ignored (negative) target.
__global__ void combine_losses_kernel(float* losses, const float* partials, const int32_t* targets,
                                      int N, int ranks) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  if (targets[n] < 0) {
    losses[n] = 0.0f;
    return;
  }
  const RowTotals totals = combine_row(partials, n, N, ranks);
  losses[n] = (float)(totals.lse - totals.target_logit);
}

// Block n: losses[n] as above (thread 0), then logits[n] (this slice) is
// overwritten in place by (exp(x - lse) - onehot) * dloss; each element is
// read and written by the same thread. An ignored (negative) target: loss 0,
// gradient 0.
template <class T>
__global__ void __launch_bounds__(kThreads)
    combine_gradient_kernel(float* losses, T* logits, const float* partials, const int32_t* targets,
                            int N, int V_local, int vocab_begin, int ranks, float dloss) {
  T* row = logits + (size_t)blockIdx.x * V_local;
  if (targets[blockIdx.x] < 0) {  // the whole block: no barrier is skipped by some threads only
    if (threadIdx.x == 0) losses[blockIdx.x] = 0.0f;
    for (int v = threadIdx.x; v < V_local; v += kThreads) store_f32(row + v, 0.0f);
    return;
  }
  __shared__ float row_lse;
  if (threadIdx.x == 0) {
    const RowTotals totals = combine_row(partials, blockIdx.x, N, ranks);
    losses[blockIdx.x] = (float)(totals.lse - totals.target_logit);
    row_lse = (float)totals.lse;
  }
  __syncthreads();
  const float lse = row_lse;
  const int target = slice_index(targets[blockIdx.x], vocab_begin, V_local);
  for (int v = threadIdx.x; v < V_local; v += kThreads) {
    float grad = expf(load_f32(row + v) - lse);
    if (v == target) grad -= 1.0f;
    store_f32(row + v, grad * dloss);
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

template <class T>
void cross_entropy_partials(float* partials, const T* logits, const int32_t* targets, int N,
                            int V_local, int vocab_begin) {
  if (N <= 0) return;
  launch(partials_kernel<T>, N, kThreads, 0, compute_stream(), partials, logits, targets, V_local,
         vocab_begin);
  LLM_CUDA_CHECK_LAUNCH();
}

template <class T>
void cross_entropy_combine(float* losses, T* logits, const float* partials, const int32_t* targets,
                           int N, int V_local, int vocab_begin, int ranks, float dloss) {
  if (N <= 0) return;
  if (logits) {
    launch(combine_gradient_kernel<T>, N, kThreads, 0, compute_stream(), losses, logits, partials,
           targets, N, V_local, vocab_begin, ranks, dloss);
  } else {
    launch(combine_losses_kernel, blocks_for(N, kLossRowsPerBlock), kLossRowsPerBlock, 0,
           compute_stream(), losses, partials, targets, N, ranks);
  }
  LLM_CUDA_CHECK_LAUNCH();
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(cross_entropy_partials);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(cross_entropy_combine);

}  // namespace llm::cuda
