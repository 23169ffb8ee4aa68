// Row-major GEMM on the CPU, C = op(A) op(B) + beta C: the entry point of
// the linear layers' products, with two builds (CMake LLM_ONEDNN):
// cpu_gemm_onednn.cpp (the default: oneDNN's matmul, JIT kernels for the
// CPU found at run time) and cpu_gemm_openblas.cpp (OpenBLAS, for builds
// without oneDNN). Both thread over the OpenMP team of the caller.
// fp32 operands always work. bf16 operands (fp32 accumulation; C fp32, or
// bf16 rounded once after beta C is added) run where the CPU has native bf16
// dot products (AVX512-BF16, AMX) and the build has oneDNN: bf16_gemm_native()
// says so, and callers widen to fp32 otherwise.
// Invariant: a product of the same shapes on the same thread count gives the
// same bits every time; called inside a parallel region, it runs on the
// calling thread alone.
#pragma once

#include "base/bf16.h"

namespace llm::cpu {

enum class Op { kNone, kTranspose };  // op(X) = X or X^T

template <class In, class Out>
struct GemmArgs {
  Op op_a, op_b;
  int M, N, K;
  const In* a;  // op(A) is (M, K): A is (M, K) or, transposed, (K, M), leading dimension lda
  int lda;
  const In* b;  // op(B) is (K, N): B is (K, N) or, transposed, (N, K), leading dimension ldb
  int ldb;
  float beta;
  Out* c;  // (M, N), leading dimension ldc
  int ldc;
};
void gemm(const GemmArgs<float, float>& g);

// Whether gemm on bf16 operands runs here natively. True when this build and
// CPU can, unless set_bf16_gemm_native(false) turned it off (tests of the
// widening path).
bool bf16_gemm_native();
void set_bf16_gemm_native(bool allowed);

// Only where bf16_gemm_native() is true (an error elsewhere).
void gemm(const GemmArgs<Bf16, float>& g);
void gemm(const GemmArgs<Bf16, Bf16>& g);

}  // namespace llm::cpu
