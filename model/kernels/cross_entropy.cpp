// Cross-entropy of the LM head on the CPU over a vocabulary slice: per-row
// partials (the slice's logsumexp and target logit), then their combination
// over the ranks into losses and, fused, dlogits in place of the logits. One
// template over the storage type (float or Bf16) of the logits, fp32 math.
// Invariant: each row is max-subtracted before exponentiation (the slice's max
// in the partials, the max of the slices' logsumexps in the combination), so
// logits of any magnitude give finite losses; the exponentials of a row are
// summed in double from an fp32 scratch row, so the fp32 and bf16 entry points
// sum the same terms in the same order (same bits); each dlogit is formed in
// fp32 and rounded to its storage type once; an ignored (negative) target's
// row is a loss of 0 and a zero gradient.
#include "model/kernels/cross_entropy.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "model/kernels/cpu_exp.h"
#include "model/kernels/cpu_lane_sum.h"

namespace llm::cpu {

namespace {

// logsumexp(row) = max + log(sum of exp(row[v] - max)) for a row of V > 0
// logits; scratch receives the V exponentials (fp32), then they are summed in
// double by one loop whatever T is.
template <class T>
float row_logsumexp(const T* row, int V, std::vector<float>& scratch) {
  scratch.resize(V);
  float* exps = scratch.data();
  float max = to_float(row[0]);
#pragma omp simd reduction(max : max)
  for (int v = 0; v < V; v++) max = to_float(row[v]) > max ? to_float(row[v]) : max;
#pragma omp simd
  for (int v = 0; v < V; v++) exps[v] = exp_vectorizable(to_float(row[v]) - max);
  const double sum = lane_sum<double>(V, [&](int v) { return (double)exps[v]; });
  return (float)(max + std::log(sum));
}

// The index of `target` in the slice starting at vocab_begin, or -1.
inline int slice_index(int32_t target, int vocab_begin, int V_local) {
  const int64_t j = (int64_t)target - vocab_begin;
  return j >= 0 && j < V_local ? (int)j : -1;
}

// Row n's totals over the ranks' partials: the logsumexp of the whole
// vocabulary (stable: the largest slice logsumexp is subtracted; empty slices,
// -inf, add nothing) and the target logit (one rank holds it, the others add 0).
struct RowTotals {
  double lse;
  double target_logit;
};
inline RowTotals combine_row(const float* partials, int n, int N, int ranks) {
  const size_t stride = 2 * (size_t)N;  // one rank's block of partials
  const float* row = partials + 2 * (size_t)n;
  double max = -INFINITY;
  for (int r = 0; r < ranks; r++) max = std::fmax(max, (double)row[r * stride]);
  double sum = 0.0, target_logit = 0.0;
  for (int r = 0; r < ranks; r++) {
    const double lse = row[r * stride];
    if (lse > -INFINITY) sum += std::exp(lse - max);
    target_logit += row[r * stride + 1];
  }
  return {max + std::log(sum), target_logit};
}

}  // namespace

template <class T>
void cross_entropy_partials(float* partials, const T* logits, const int32_t* targets, int N,
                            int V_local, int vocab_begin) {
#pragma omp parallel
  {
    std::vector<float> scratch;  // per thread: the logits stay untouched
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      const T* row = logits + (size_t)n * V_local;
      const int j = slice_index(targets[n], vocab_begin, V_local);
      partials[2 * (size_t)n] = V_local > 0 ? row_logsumexp(row, V_local, scratch) : -INFINITY;
      partials[2 * (size_t)n + 1] = j >= 0 ? to_float(row[j]) : 0.0f;
    }
  }
}

template <class T>
void cross_entropy_combine(float* losses, T* logits, const float* partials, const int32_t* targets,
                           int N, int V_local, int vocab_begin, int ranks, float dloss) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    T* row = logits ? logits + (size_t)n * V_local : nullptr;
    if (targets[n] < 0) {  // ignored: no loss, no gradient
      losses[n] = 0.0f;
      for (int v = 0; row && v < V_local; v++) store(row + v, 0.0f);
      continue;
    }
    const RowTotals totals = combine_row(partials, n, N, ranks);
    losses[n] = (float)(totals.lse - totals.target_logit);
    if (!row) continue;
    const float lse = (float)totals.lse;
    const int j = slice_index(targets[n], vocab_begin, V_local);
    const float target_logit = j >= 0 ? to_float(row[j]) : 0.0f;  // before the row is overwritten
#pragma omp simd
    for (int v = 0; v < V_local; v++)
      store(row + v, exp_vectorizable(to_float(row[v]) - lse) * dloss);
    if (j >= 0) store(row + j, (exp_vectorizable(target_logit - lse) - 1.0f) * dloss);
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(cross_entropy_partials);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(cross_entropy_combine);

}  // namespace llm::cpu
