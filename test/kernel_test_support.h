// Shared helpers of the kernel tests (the op harness, test/op_harness.h, and
// the GPU suites through gpu_test_support.h): the tolerance type, random token
// ids, bit-for-bit comparison, running under a given OpenMP thread count, and
// the shape structs several op families iterate over.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace llm::test_support {

using Floats = std::vector<float>;
using Ints = std::vector<int32_t>;

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// |actual - expected| <= abs + rel * |expected|, elementwise.
struct Tolerance {
  double abs;
  double rel;
};

// n token ids uniform in [0, upper).
inline Ints random_ints(size_t n, int32_t upper, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, upper - 1);
  Ints x(n);
  for (int32_t& v : x) v = dist(rng);
  return x;
}

inline void expect_same_bits(const Floats& a, const Floats& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

// Runs f with n OpenMP threads, restoring the previous setting afterwards.
template <class F>
auto with_threads(int n, F f) {
  const int previous = omp_get_max_threads();
  omp_set_num_threads(n);
  auto result = f();
  omp_set_num_threads(previous);
  return result;
}

// N rows of C (rmsnorm) or F (swiglu) columns.
struct RowShape {
  int N, C;
};

struct AttentionShape {
  int B, T, H, KV, D;
};

inline std::string describe(const AttentionShape& s) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
         " KV=" + std::to_string(s.KV) + " D=" + std::to_string(s.D);
}

struct MatmulShape {
  int N, C, OC;
};

}  // namespace llm::test_support
