// Cross-entropy of the LM head on the CPU, optionally fused with its gradient
// (the logits buffer is overwritten by dlogits); one template over the storage
// type (float or Bf16) of the logits, with fp32 math.
// Invariant: each row is max-subtracted before exponentiation, so logits of
// any magnitude give finite losses; the exponentials are summed in double.
// Each dlogit is rounded to its storage type once (in bf16 the softmax
// probability minus the one-hot is formed in fp32 first).
#include "model/kernels/cross_entropy.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "model/kernels/cpu_exp.h"

namespace llm::cpu {

namespace {

// The max-subtracted exponentials of one row: exps[v] = exp(row[v] - max), and
// their sum, so logsumexp(row) = max + log(sum) and softmax(row) = exps / sum.
struct RowExps {
  float max;
  double sum;
};

// exps may alias row (fp32 logits, formed in place).
template <class T>
RowExps row_exps(float* exps, const T* row, int V) {
  float max = to_float(row[0]);
#pragma omp simd reduction(max : max)
  for (int v = 0; v < V; v++) max = to_float(row[v]) > max ? to_float(row[v]) : max;
#pragma omp simd
  for (int v = 0; v < V; v++) exps[v] = exp_vectorizable(to_float(row[v]) - max);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int v = 0; v < V; v++) sum += exps[v];
  return {max, sum};
}

// The fp32 row a gradient is formed in, and its store into the logits row:
// fp32 logits are their own gradient row (in place, nothing to store); bf16
// logits use per-thread scratch, rounded into the row once at the end.
inline float* gradient_row(float* row, std::vector<float>&, int) { return row; }
inline float* gradient_row(Bf16*, std::vector<float>& scratch, int V) {
  scratch.resize(V);
  return scratch.data();
}
inline void store_gradient_row(float*, const float*, int) {}
inline void store_gradient_row(Bf16* row, const float* grad, int V) {
#pragma omp simd
  for (int v = 0; v < V; v++) row[v] = to_bf16(grad[v]);
}

}  // namespace

template <class T>
void cross_entropy_forward(float* losses, const T* logits, const int32_t* targets, int N, int V) {
#pragma omp parallel
  {
    std::vector<float> exps(V);  // per-thread scratch: logits stay untouched
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      const T* row = logits + (size_t)n * V;
      const RowExps e = row_exps(exps.data(), row, V);
      losses[n] = (float)(e.max + std::log(e.sum) - to_float(row[targets[n]]));
    }
  }
}

template <class T>
void cross_entropy_forward_backward(float* losses, T* logits, const int32_t* targets, int N, int V,
                                    float dloss) {
#pragma omp parallel
  {
    std::vector<float> scratch;
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      T* row = logits + (size_t)n * V;
      float* grad = gradient_row(row, scratch, V);
      const float target_logit = to_float(row[targets[n]]);
      const RowExps e = row_exps(grad, row, V);  // grad now holds exp(logit - max)
      losses[n] = (float)(e.max + std::log(e.sum) - target_logit);
      const float scale = (float)(dloss / e.sum);
#pragma omp simd
      for (int v = 0; v < V; v++) grad[v] *= scale;
      grad[targets[n]] -= dloss;
      store_gradient_row(row, grad, V);
    }
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(cross_entropy_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(cross_entropy_forward_backward);

}  // namespace llm::cpu
