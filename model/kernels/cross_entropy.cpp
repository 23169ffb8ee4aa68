// Cross-entropy of the LM head on the CPU, optionally fused with its gradient
// (the logits buffer is overwritten by dlogits).
// Invariant: each row is max-subtracted before exponentiation, so logits of
// any magnitude give finite losses; the exponentials are summed in double.
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

// exps may alias row.
RowExps row_exps(float* exps, const float* row, int V) {
  float max = row[0];
#pragma omp simd reduction(max : max)
  for (int v = 0; v < V; v++) max = row[v] > max ? row[v] : max;
#pragma omp simd
  for (int v = 0; v < V; v++) exps[v] = exp_vectorizable(row[v] - max);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int v = 0; v < V; v++) sum += exps[v];
  return {max, sum};
}

}  // namespace

void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int N,
                           int V) {
#pragma omp parallel
  {
    std::vector<float> exps(V);  // per-thread scratch: logits stay untouched
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      const float* row = logits + (size_t)n * V;
      const RowExps e = row_exps(exps.data(), row, V);
      losses[n] = (float)(e.max + std::log(e.sum) - row[targets[n]]);
    }
  }
}

void cross_entropy_forward_backward(float* losses, float* logits, const int32_t* targets, int N,
                                    int V, float dloss) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float* row = logits + (size_t)n * V;
    const float target_logit = row[targets[n]];
    const RowExps e = row_exps(row, row, V);  // row now holds exp(logit - max)
    losses[n] = (float)(e.max + std::log(e.sum) - target_logit);
    const float scale = (float)(dloss / e.sum);
#pragma omp simd
    for (int v = 0; v < V; v++) row[v] *= scale;
    row[targets[n]] -= dloss;
  }
}

}  // namespace llm::cpu
