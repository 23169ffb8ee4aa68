// RMSNorm on the CPU: y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps),
// one template over the storage type (float or Bf16) of x, y, weight and their
// gradients; the row math is cpu_rmsnorm_rows.h's (fp32, the sum of squares
// double, rounded once on store), one row per work item.
// Invariant: dweight is summed over rows in row order inside fixed column
// blocks, so its bits do not depend on the thread count; dinp and dweight
// accumulate (+=). A row's amax (backward: after its +=) and its FP8 codes
// are read back from the row just written, while it is in cache.
#include "model/kernels/rmsnorm.h"

#include <cstddef>

#include "model/kernels/cpu_rmsnorm_rows.h"

namespace llm::cpu {

template <class T>
void rmsnorm_forward_fp8(T* out, float* rstd, const T* inp, const T* weight, int N, int C,
                         float eps, float* row_amax, uint8_t* codes, const Fp8Scale* scale) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    T* row = out + (size_t)n * C;
    rstd[n] = rmsnorm_row_forward(row, inp + (size_t)n * C, weight, C, eps);
    if (row_amax) row_amax[n] = fp8_amax_of(row, C);
    if (codes) fp8_encode_row(codes + (size_t)n * C, row, C, scale->scale, Fp8Format::e4m3);
  }
}

template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps,
                     float* row_amax) {
  rmsnorm_forward_fp8(out, rstd, inp, weight, N, C, eps, row_amax, nullptr, nullptr);
}

template <class T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                      const float* rstd, int N, int C, float* row_amax) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const size_t row = (size_t)n * C;
    rmsnorm_row_backward</*kAccumulate=*/true>(dinp + row, dout + row, inp + row, weight, rstd[n],
                                               C);
    if (row_amax) row_amax[n] = fp8_amax_of(dinp + row, C);
  }
  accumulate_gain_gradient<T>(dweight, N, C, [&](int n) {
    return NormRow<T>{inp + (size_t)n * C, dout + (size_t)n * C, rstd[n]};
  });
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(rmsnorm_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(rmsnorm_forward_fp8);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(rmsnorm_backward);

}  // namespace llm::cpu
