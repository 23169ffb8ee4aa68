// A register-blocked small matrix product for the CPU kernels that work on
// cache-sized tiles (attention): C (m, n) += A (m, k) B (k, n), fp32. The
// BLAS is built for large operands: on a 64 x 64 tile its packing and thread
// dispatch cost more than the product, so tiles use this kernel instead.
// A is read through two strides (row and column), so A and its transpose cost
// the same; B and C are row-major with contiguous rows.
// Invariant: every element of C is its old value plus the terms a[i][p] *
// b[p][j] added one at a time in increasing p, each as one fused
// multiply-add (rounded once), whatever the blocking, the vector width or the
// caller's thread: results are bitwise reproducible on every x86-64 CPU.
// The fusion is written out, never left to the compiler's contraction, which
// differs by target and tuning (docs/testing.md#determinism-which-runs-give-the-same-bits).
#pragma once

#if defined(__FMA__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstddef>
#include <cstring>

namespace llm::cpu {

// Operand views: element (i, p) of A is a[i * row_stride + p * col_stride].
struct TileA {
  const float* a;
  size_t row_stride, col_stride;
};
struct TileB {
  const float* b;
  size_t row_stride;  // elements (p, j) and (p + 1, j) are this far apart; j is contiguous
};
struct TileC {
  float* c;
  size_t row_stride;
};

namespace tile_gemm_detail {

#if defined(__AVX512F__)
constexpr int kLanes = 16;  // one zmm register
constexpr int kRows = 8;    // 8 x 2 accumulators of the 32 registers
#else
constexpr int kLanes = 8;  // one ymm register
constexpr int kRows = 6;   // 6 x 2 accumulators, 2 loads of B and a broadcast: 15 of 16 registers
#endif
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));

// acc += a * b per lane, rounded once: the FMA instruction where the target
// has one, else std::fma lane by lane (exact in software, so a build without
// FMA gives the same bits, only slower). Vectors pass by reference, keeping
// them out of the calling convention.
inline void add_product(Vec& acc, float a, const Vec& b) {
#if defined(__AVX512F__)
  acc = (Vec)_mm512_fmadd_ps(_mm512_set1_ps(a), (__m512)b, (__m512)acc);
#elif defined(__FMA__)
  acc = (Vec)_mm256_fmadd_ps(_mm256_set1_ps(a), (__m256)b, (__m256)acc);
#else
  for (int lane = 0; lane < kLanes; lane++) acc[lane] = std::fma(a, b[lane], acc[lane]);
#endif
}

// C[0, R) x [0, NV lanes) += A[0, R) x [0, k) B[0, k) x [0, NV lanes): the
// R x NV accumulators stay in registers for the whole loop over p. memcpy is
// an unaligned vector load or store, and keeps vector types out of function
// signatures (whose ABI depends on the target's vector extensions).
template <int R, int NV>
inline void block(TileC c, TileA a, TileB b, int k) {
  Vec acc[R][NV];
  for (int r = 0; r < R; r++)
    for (int v = 0; v < NV; v++)
      std::memcpy(&acc[r][v], c.c + r * c.row_stride + v * kLanes, sizeof(Vec));
  for (int p = 0; p < k; p++) {
    Vec bv[NV];
    for (int v = 0; v < NV; v++)
      std::memcpy(&bv[v], b.b + p * b.row_stride + v * kLanes, sizeof(Vec));
    const float* a_p = a.a + p * a.col_stride;
    for (int r = 0; r < R; r++) {
      const float a_rp = a_p[r * a.row_stride];
      for (int v = 0; v < NV; v++) add_product(acc[r][v], a_rp, bv[v]);
    }
  }
  for (int r = 0; r < R; r++)
    for (int v = 0; v < NV; v++)
      std::memcpy(c.c + r * c.row_stride + v * kLanes, &acc[r][v], sizeof(Vec));
}

// All m rows of one column block of NV vectors: kRows at a time, then the rest.
template <int NV>
inline void column_block(TileC c, TileA a, TileB b, int m, int k) {
  int i = 0;
  for (; i + kRows <= m; i += kRows)
    block<kRows, NV>({c.c + i * c.row_stride, c.row_stride},
                     {a.a + i * a.row_stride, a.row_stride, a.col_stride}, b, k);
  const TileC c_rest{c.c + i * c.row_stride, c.row_stride};
  const TileA a_rest{a.a + i * a.row_stride, a.row_stride, a.col_stride};
  switch (m - i) {  // fewer than kRows rows left
#if defined(__AVX512F__)
    case 7:
      block<7, NV>(c_rest, a_rest, b, k);
      break;
    case 6:
      block<6, NV>(c_rest, a_rest, b, k);
      break;
#endif
    case 5:
      block<5, NV>(c_rest, a_rest, b, k);
      break;
    case 4:
      block<4, NV>(c_rest, a_rest, b, k);
      break;
    case 3:
      block<3, NV>(c_rest, a_rest, b, k);
      break;
    case 2:
      block<2, NV>(c_rest, a_rest, b, k);
      break;
    case 1:
      block<1, NV>(c_rest, a_rest, b, k);
      break;
    default:
      break;
  }
}

}  // namespace tile_gemm_detail

// C (m, n) += A (m, k) B (k, n): columns in blocks of two vectors, then one,
// then single columns (head dims that are not a multiple of the vector width).
inline void tile_gemm(TileC c, TileA a, TileB b, int m, int n, int k) {
  using namespace tile_gemm_detail;
  int j = 0;
  for (; j + 2 * kLanes <= n; j += 2 * kLanes)
    column_block<2>({c.c + j, c.row_stride}, a, {b.b + j, b.row_stride}, m, k);
  if (j + kLanes <= n) {
    column_block<1>({c.c + j, c.row_stride}, a, {b.b + j, b.row_stride}, m, k);
    j += kLanes;
  }
  for (; j < n; j++) {
    for (int i = 0; i < m; i++) {
      float sum = c.c[i * c.row_stride + j];
      for (int p = 0; p < k; p++)
        sum = std::fma(a.a[i * a.row_stride + p * a.col_stride], b.b[p * b.row_stride + j], sum);
      c.c[i * c.row_stride + j] = sum;
    }
  }
}

}  // namespace llm::cpu
