// cpu_gemm.h through OpenBLAS (OpenMP build), for builds without oneDNN
// (LLM_ONEDNN=OFF). C is cut into one block per OpenMP thread, whole rows
// when M is the larger side, else whole columns, with boundaries on
// multiples of kAlign so each block keeps the micro-kernel's full tiles, and
// each block is a single-threaded OpenBLAS call: OpenBLAS's own threading
// makes its threads share packed panels and wait for each other inside every
// call, while separate blocks need no synchronization until the join (on the
// model's shapes, two threads: 2-12% faster, and steadier when a thread is
// descheduled).
// OpenBLAS 0.3.21 as Debian builds it has no bf16 GEMM (no cblas_sbgemm), so
// bf16 is never native here.
// Invariant: each element of C is computed by one single-threaded sgemm over
// all of K.
#include "model/kernels/cpu_gemm.h"

#include <cblas.h>
#include <omp.h>

#include <cstddef>

#include "base/error.h"

namespace llm::cpu {

namespace {

constexpr int kAlign = 16;  // rows or columns per block boundary (the micro-kernels' tile)

CBLAS_TRANSPOSE cblas_op(Op op) { return op == Op::kNone ? CblasNoTrans : CblasTrans; }

// Inside a parallel region (the caller's or gemm's own), so OpenBLAS runs
// it on this thread alone.
void sgemm_block(const GemmArgs<float, float>& g) {
  cblas_sgemm(CblasRowMajor, cblas_op(g.op_a), cblas_op(g.op_b), g.M, g.N, g.K, 1.0f, g.a, g.lda,
              g.b, g.ldb, g.beta, g.c, g.ldc);
}

// Start of block `index` of `blocks` over [0, size), on a multiple of kAlign.
int block_start(int size, int index, int blocks) {
  const long units = (size + kAlign - 1) / kAlign;
  const long start = units * index / blocks * kAlign;
  return start < size ? (int)start : size;
}

}  // namespace

void gemm(const GemmArgs<float, float>& g) {
  if (omp_in_parallel()) {
    sgemm_block(g);
    return;
  }
  const bool by_rows = g.M >= g.N;
  const int extent = by_rows ? g.M : g.N;
  const int threads = extent < 2 * kAlign ? 1 : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
    const int begin = block_start(extent, t, team), end = block_start(extent, t + 1, team);
    if (begin < end) {
      GemmArgs<float, float> block = g;
      if (by_rows) {
        block.M = end - begin;
        block.a += g.op_a == Op::kNone ? (size_t)begin * g.lda : (size_t)begin;
        block.c += (size_t)begin * g.ldc;
      } else {
        block.N = end - begin;
        block.b += g.op_b == Op::kNone ? (size_t)begin : (size_t)begin * g.ldb;
        block.c += begin;
      }
      sgemm_block(block);
    }
  }
}

bool bf16_gemm_native() { return false; }

void set_bf16_gemm_native(bool) {}

void gemm(const GemmArgs<Bf16, float>&) { LLM_FAIL("bf16 GEMM called in a build without oneDNN"); }

void gemm(const GemmArgs<Bf16, Bf16>&) { LLM_FAIL("bf16 GEMM called in a build without oneDNN"); }

}  // namespace llm::cpu
