// Row-major fp32 GEMM on the CPU, C = op(A) op(B) + beta C, threaded by us:
// C is cut into one block per OpenMP thread and each block is a
// single-threaded OpenBLAS call. OpenBLAS's own threading makes its threads
// share packed panels and wait for each other inside every call; separate
// blocks need no synchronization until the join (on the model's shapes, two
// threads: 2-12% faster, and steadier when a thread is descheduled).
// Invariant: each element of C is computed by one single-threaded sgemm over
// all of K, so how C is cut does not change the order of its sum over K.
// Called inside a parallel region, it runs on the calling thread alone.
#pragma once

#include <cblas.h>

namespace llm::cpu {

struct SgemmArgs {
  CBLAS_TRANSPOSE trans_a, trans_b;
  int M, N, K;
  const float* a;  // op(A) is (M, K): A is (M, K) or, transposed, (K, M), leading dimension lda
  int lda;
  const float* b;  // op(B) is (K, N): B is (K, N) or, transposed, (N, K), leading dimension ldb
  int ldb;
  float beta;
  float* c;  // (M, N), leading dimension ldc
  int ldc;
};

void sgemm(const SgemmArgs& g);

}  // namespace llm::cpu
