// Bias-free linear layers on the CPU through OpenBLAS sgemm (row-major).
// Invariant: dweight accumulates (beta = 1), dinp is overwritten (beta = 0).
#include "model/kernels/matmul.h"

#include <cblas.h>

namespace llm::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, int N, int C, int OC) {
  // out (N, OC) = inp (N, C) @ weight (OC, C)^T
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out,
              OC);
}

void matmul_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
  if (dinp != nullptr) {
    // dinp (N, C) = dout (N, OC) @ weight (OC, C)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                0.0f, dinp, C);
  }
  // dweight (OC, C) += dout (N, OC)^T @ inp (N, C)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
}

}  // namespace llm::cpu
