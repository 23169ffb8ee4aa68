// Checks of fp32 matrix products shared by the CPU product tests
// (test_cpu_gemm.cpp, test_cpu_tile_gemm.cpp): seeded operands and a
// comparison against the product computed in double.
// Invariant: a result passes when each element is within the standard bound
// of a k-term fp32 sum, (k + 1) 2^-24 sum |terms|, of the exact one.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace llm::test_support {

inline std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = uniform(rng);
  return x;
}

// Checks c (M, N; row stride ldc) against c0 + op(A) op(B) computed in
// double, element (i, p) of op(A) being a(i, p) and (p, j) of op(B) b(p, j).
template <class ElemA, class ElemB>
void expect_product(const std::vector<float>& c, const std::vector<float>& c0, int ldc, int M,
                    int N, int K, ElemA a, ElemB b, const std::string& what) {
  constexpr double kUnitRoundoff = 0x1p-24;
  int failures = 0;
  for (int i = 0; i < M; i++) {
    for (int j = 0; j < N; j++) {
      double exact = c0[(size_t)i * ldc + j], magnitude = std::fabs(exact);
      for (int p = 0; p < K; p++) {
        const double term = (double)a(i, p) * b(p, j);
        exact += term;
        magnitude += std::fabs(term);
      }
      const double bound = (K + 1) * kUnitRoundoff * magnitude;
      const double got = c[(size_t)i * ldc + j];
      if (!(std::fabs(got - exact) <= bound) && failures++ < 5) {
        ADD_FAILURE() << what << ": C[" << i << "][" << j << "] = " << got << ", exact " << exact
                      << ", bound " << bound;
      }
    }
  }
  EXPECT_EQ(failures, 0) << what;
}

}  // namespace llm::test_support
