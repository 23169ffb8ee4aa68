// See cpu_sgemm.h. Blocks are whole rows of C when M is the larger side,
// else whole columns, with boundaries on multiples of kAlign so each block
// keeps the BLAS micro-kernel's full tiles.
#include "model/kernels/cpu_sgemm.h"

#include <omp.h>

#include <cstddef>

namespace llm::cpu {

namespace {

constexpr int kAlign = 16;  // rows or columns per block boundary (the micro-kernels' tile)

void sgemm_block(const SgemmArgs& g) {
  cblas_sgemm(CblasRowMajor, g.trans_a, g.trans_b, g.M, g.N, g.K, 1.0f, g.a, g.lda, g.b, g.ldb,
              g.beta, g.c, g.ldc);
}

// Start of block `index` of `blocks` over [0, size), on a multiple of kAlign.
int block_start(int size, int index, int blocks) {
  const long units = (size + kAlign - 1) / kAlign;
  const long start = units * index / blocks * kAlign;
  return start < size ? (int)start : size;
}

}  // namespace

void sgemm(const SgemmArgs& g) {
  const bool by_rows = g.M >= g.N;
  const int extent = by_rows ? g.M : g.N;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || extent < 2 * kAlign) {
    sgemm_block(g);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
    const int begin = block_start(extent, t, team), end = block_start(extent, t + 1, team);
    if (begin < end) {
      SgemmArgs block = g;
      if (by_rows) {
        block.M = end - begin;
        block.a += g.trans_a == CblasNoTrans ? (size_t)begin * g.lda : (size_t)begin;
        block.c += (size_t)begin * g.ldc;
      } else {
        block.N = end - begin;
        block.b += g.trans_b == CblasNoTrans ? (size_t)begin : (size_t)begin * g.ldb;
        block.c += begin;
      }
      sgemm_block(block);
    }
  }
}

}  // namespace llm::cpu
