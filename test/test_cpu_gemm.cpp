// The CPU linear layers' fp32 gemm (cpu_gemm.h) against a double-precision
// reference, for all four transposition pairs, beta 0 and 1, split by rows
// and by columns over 1 to 3 threads, and from every thread of a team at once.
// Invariant: each result is within the standard bound of a k-term sum,
// (k + 1) 2^-24 sum |terms|, of the exact one (product_checks.h).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/kernels/cpu_gemm.h"
#include "test/product_checks.h"

namespace llm::cpu {
namespace {

using test_support::expect_product;
using test_support::random_floats;

struct SgemmCase {
  Op trans_a, trans_b;
  int M, N, K;
  float beta;
};

std::string describe(const SgemmCase& g, int threads) {
  return std::string(g.trans_a == Op::kTranspose ? "T" : "N") +
         (g.trans_b == Op::kTranspose ? "T" : "N") + " M=" + std::to_string(g.M) +
         " N=" + std::to_string(g.N) + " K=" + std::to_string(g.K) +
         " beta=" + std::to_string((int)g.beta) + " threads=" + std::to_string(threads);
}

// Split by rows (M >= N) and by columns, extents that are not multiples of
// the 16-row block boundary, too small to split, and the layer shapes' forms:
// NT forward, NN input gradient, TN weight gradient (beta = 1).
constexpr SgemmCase kSgemmCases[] = {
    {Op::kNone, Op::kTranspose, 75, 20, 33, 0.0f},
    {Op::kNone, Op::kNone, 21, 70, 19, 0.0f},
    {Op::kTranspose, Op::kNone, 50, 37, 64, 1.0f},
    {Op::kTranspose, Op::kTranspose, 18, 99, 7, 1.0f},
    {Op::kNone, Op::kTranspose, 31, 5, 9, 0.0f},
    {Op::kNone, Op::kNone, 130, 129, 40, 1.0f},
};

void check_sgemm(const SgemmCase& g, int threads) {
  SCOPED_TRACE(describe(g, threads));
  const int lda = g.trans_a == Op::kNone ? g.K : g.M, ldb = g.trans_b == Op::kNone ? g.N : g.K;
  const std::vector<float> a = random_floats((size_t)g.M * g.K, 7),
                           b = random_floats((size_t)g.K * g.N, 8);
  const std::vector<float> c0 =
      g.beta == 0.0f ? std::vector<float>((size_t)g.M * g.N, NAN)  // beta 0 ignores C
                     : random_floats((size_t)g.M * g.N, 9);
  std::vector<float> c = c0, again = c0;
  omp_set_num_threads(threads);
  gemm({g.trans_a, g.trans_b, g.M, g.N, g.K, a.data(), lda, b.data(), ldb, g.beta, c.data(), g.N});
  gemm({g.trans_a, g.trans_b, g.M, g.N, g.K, a.data(), lda, b.data(), ldb, g.beta, again.data(),
        g.N});
  auto a_at = [&](int i, int p) {
    return g.trans_a == Op::kNone ? a[(size_t)i * lda + p] : a[(size_t)p * lda + i];
  };
  auto b_at = [&](int p, int j) {
    return g.trans_b == Op::kNone ? b[(size_t)p * ldb + j] : b[(size_t)j * ldb + p];
  };
  const std::vector<float> start = g.beta == 0.0f ? std::vector<float>(c0.size(), 0.0f) : c0;
  expect_product(c, start, g.N, g.M, g.N, g.K, a_at, b_at, describe(g, threads));
  EXPECT_EQ(std::memcmp(c.data(), again.data(), c.size() * sizeof(float)), 0)
      << "a repeat changed bits";
}

TEST(Sgemm, MatchesTheExactProductOverThreadCounts) {
  const int saved = omp_get_max_threads();
  for (const SgemmCase& g : kSgemmCases) {
    for (int threads = 1; threads <= 3; threads++) check_sgemm(g, threads);
  }
  omp_set_num_threads(saved);
}

// Called from every thread of a team at once (as a kernel inside a parallel
// loop would), each on its own output: every thread gets the whole, correct
// product (each thread keeps its own library state).
TEST(Sgemm, EveryThreadOfATeamComputesItsOwnProduct) {
  const SgemmCase g = kSgemmCases[5];
  const std::vector<float> a = random_floats((size_t)g.M * g.K, 10),
                           b = random_floats((size_t)g.K * g.N, 11);
  constexpr int kTeam = 2;
  std::vector<std::vector<float>> c(kTeam, std::vector<float>((size_t)g.M * g.N, NAN));
#pragma omp parallel num_threads(kTeam)
  {
    std::vector<float>& mine = c[omp_get_thread_num()];
    gemm({g.trans_a, g.trans_b, g.M, g.N, g.K, a.data(), g.K, b.data(), g.N, 0.0f, mine.data(),
          g.N});
  }
  auto a_at = [&](int i, int p) { return a[(size_t)i * g.K + p]; };
  auto b_at = [&](int p, int j) { return b[(size_t)p * g.N + j]; };
  for (int t = 0; t < kTeam; t++) {
    expect_product(c[t], std::vector<float>(c[t].size(), 0.0f), g.N, g.M, g.N, g.K, a_at, b_at,
                   "thread " + std::to_string(t));
  }
}

}  // namespace
}  // namespace llm::cpu
