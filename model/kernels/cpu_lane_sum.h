// A sum whose order is written down, for the CPU kernels' reductions (norms,
// dot products, softmax denominators). `#pragma omp simd reduction(+)` lets
// the compiler keep as many partial sums as its vectors have lanes, so an
// AVX2 build and an AVX-512 build of the same loop add in different orders
// and give different bits; here the number of partial sums is fixed.
// Invariant: lane l adds the terms i = l (mod kSumLanes) in increasing i, then
// the lanes are combined by halves (l + 8 into l, then l + 4, 2, 1), whatever
// the target's vector width: the same bits on every CPU.
#pragma once

namespace llm::cpu {

constexpr int kSumLanes = 16;  // one AVX-512 vector, two AVX2 ones, four SSE ones

// sum over i in [0, n) of term(i), in the order above; Acc is float or double.
template <class Acc, class Term>
inline Acc lane_sum(int n, Term term) {
  Acc lanes[kSumLanes] = {};
  int i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
#pragma omp simd
    for (int l = 0; l < kSumLanes; l++) lanes[l] += term(i + l);
  }
  for (int l = 0; i + l < n; l++) lanes[l] += term(i + l);
  for (int half = kSumLanes / 2; half > 0; half /= 2) {
    for (int l = 0; l < half; l++) lanes[l] += lanes[l + half];
  }
  return lanes[0];
}

}  // namespace llm::cpu
