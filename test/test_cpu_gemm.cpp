// The CPU kernels' two matrix-product helpers against a double-precision
// reference: tile_gemm (cpu_tile_gemm.h, attention's tiles) with A read
// directly and transposed, over sizes that leave every row and column
// remainder of its register blocks; and the fp32 gemm (cpu_gemm.h, the linear
// layers) for all four transposition pairs, beta 0 and 1, split by rows and by
// columns over 1 to 3 threads, and from every thread of a team at once.
// Invariant: each fp32 result is within the standard bound of a k-term sum,
// (k + 1) 2^-24 sum |terms|, of the exact one; tile_gemm's blocking does not
// change any bit (a whole product equals the same product row by row and
// column by column).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/kernels/cpu_gemm.h"
#include "model/kernels/cpu_tile_gemm.h"

namespace llm::cpu {
namespace {

std::vector<float> random_floats(size_t n, unsigned seed) {
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

struct TileCase {
  int m, n, k;
  bool transposed_a;
};

std::string describe(const TileCase& t) {
  return "m=" + std::to_string(t.m) + " n=" + std::to_string(t.n) + " k=" + std::to_string(t.k) +
         (t.transposed_a ? " A^T" : " A");
}

// Sizes around the register blocks (rows 6 or 8, columns 1 or 2 vectors of
// 8 or 16 floats, then single columns), attention's 64 x 64 tiles and a
// 16-row chunk, plus empty products.
constexpr TileCase kTileCases[] = {
    {1, 1, 1, false},    {5, 7, 3, false},    {7, 9, 5, true},    {8, 16, 4, false},
    {9, 33, 6, true},    {13, 48, 17, false}, {16, 64, 32, true}, {64, 64, 64, false},
    {64, 123, 40, true}, {23, 31, 64, false}, {0, 16, 8, false},  {4, 16, 0, false},
};

TEST(TileGemm, MatchesTheExactProductWithinTheSumBound) {
  for (const TileCase& t : kTileCases) {
    SCOPED_TRACE(describe(t));
    const int lda = t.transposed_a ? t.m + 3 : t.k + 2, ldb = t.n + 5,
              ldc = t.n + 1;  // padded strides
    const std::vector<float> a = random_floats((size_t)(t.transposed_a ? t.k : t.m) * lda + 1, 1);
    const std::vector<float> b = random_floats((size_t)t.k * ldb + 1, 2);
    const std::vector<float> c0 = random_floats((size_t)t.m * ldc + 1, 3);
    const TileA view =
        t.transposed_a ? TileA{a.data(), 1, (size_t)lda} : TileA{a.data(), (size_t)lda, 1};
    std::vector<float> c = c0;
    tile_gemm({c.data(), (size_t)ldc}, view, {b.data(), (size_t)ldb}, t.m, t.n, t.k);
    auto a_at = [&](int i, int p) { return a[i * view.row_stride + p * view.col_stride]; };
    auto b_at = [&](int p, int j) { return b[(size_t)p * ldb + j]; };
    expect_product(c, c0, ldc, t.m, t.n, t.k, a_at, b_at, describe(t));
    // Padding between rows is never written.
    for (int i = 0; i < t.m; i++) {
      for (int j = t.n; j < ldc; j++) EXPECT_EQ(c[(size_t)i * ldc + j], c0[(size_t)i * ldc + j]);
    }
  }
}

TEST(TileGemm, BlockingDoesNotChangeAnyBit) {
  for (const TileCase& t : kTileCases) {
    SCOPED_TRACE(describe(t));
    const int lda = t.transposed_a ? t.m : t.k;
    const std::vector<float> a = random_floats((size_t)t.m * t.k, 4),
                             b = random_floats((size_t)t.k * t.n, 5);
    const std::vector<float> c0 = random_floats((size_t)t.m * t.n, 6);
    auto view = [&](int row) {  // A from row `row` on
      return t.transposed_a ? TileA{a.data() + row, 1, (size_t)lda}
                            : TileA{a.data() + (size_t)row * lda, (size_t)lda, 1};
    };
    std::vector<float> whole = c0, by_rows = c0, by_columns = c0;
    tile_gemm({whole.data(), (size_t)t.n}, view(0), {b.data(), (size_t)t.n}, t.m, t.n, t.k);
    for (int i = 0; i < t.m; i++)
      tile_gemm({by_rows.data() + (size_t)i * t.n, (size_t)t.n}, view(i), {b.data(), (size_t)t.n},
                1, t.n, t.k);
    for (int j = 0; j < t.n; j++)
      tile_gemm({by_columns.data() + j, (size_t)t.n}, view(0), {b.data() + j, (size_t)t.n}, t.m, 1,
                t.k);
    EXPECT_EQ(std::memcmp(whole.data(), by_rows.data(), whole.size() * sizeof(float)), 0)
        << "row by row";
    EXPECT_EQ(std::memcmp(whole.data(), by_columns.data(), whole.size() * sizeof(float)), 0)
        << "column by column";
  }
}

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
