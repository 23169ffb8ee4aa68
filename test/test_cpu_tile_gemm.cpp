// The attention tiles' register-blocked product (cpu_tile_gemm.h) against a
// double-precision reference, with A read directly and transposed, over sizes
// that leave every row and column remainder of its register blocks.
// Invariant: each result is within the standard bound of a k-term sum,
// (k + 1) 2^-24 sum |terms|, of the exact one (product_checks.h); blocking
// does not change any bit (a whole product equals the same product row by
// row and column by column). Also built for x86-64-v3 (test/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/kernels/cpu_tile_gemm.h"
#include "test/product_checks.h"

namespace llm::cpu {
namespace {

using test_support::expect_product;
using test_support::random_floats;

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

}  // namespace
}  // namespace llm::cpu
