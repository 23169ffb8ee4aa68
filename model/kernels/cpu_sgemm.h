// Row-major fp32 GEMM on the CPU, C = op(A) op(B) + beta C: the one entry
// point of the linear layers' products, with two builds (CMake LLM_ONEDNN):
// cpu_sgemm_onednn.cpp (the default: oneDNN's matmul, JIT kernels for the
// CPU found at run time) and cpu_sgemm_openblas.cpp (OpenBLAS, for builds
// without oneDNN). Both thread over the OpenMP team of the caller.
// Invariant: a product of the same shapes on the same thread count gives the
// same bits every time; called inside a parallel region, it runs on the
// calling thread alone.
#pragma once

namespace llm::cpu {

enum class Op { kNone, kTranspose };  // op(X) = X or X^T

struct SgemmArgs {
  Op op_a, op_b;
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
