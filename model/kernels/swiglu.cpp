// SwiGLU gating on the CPU: out = silu(gate) * up over rows of [gate | up],
// one template over the storage type (float or Bf16); the math is fp32.
// Invariant: purely elementwise per row; backward overwrites dh13; a row's
// amax (either pass) and its FP8 codes (forward) are read back from the row
// just written.
#include "model/kernels/swiglu.h"

#include <cstddef>

#include "model/kernels/cpu_exp.h"

namespace llm::cpu {

template <class T>
void swiglu_forward_fp8(T* out, const T* h13, int N, int F, float* row_amax, uint8_t* codes,
                        const Fp8Scale* scale) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* gate = h13 + (size_t)n * 2 * F;
    const T* up = gate + F;
    T* o = out + (size_t)n * F;
#pragma omp simd
    for (int i = 0; i < F; i++) {
      const float g = to_float(gate[i]);
      const float sigmoid = 1.0f / (1.0f + exp_vectorizable(-g));
      store(o + i, g * sigmoid * to_float(up[i]));
    }
    if (row_amax) row_amax[n] = fp8_amax_of(o, F);
    if (codes) fp8_encode_row(codes + (size_t)n * F, o, F, scale->scale, Fp8Format::e4m3);
  }
}

template <class T>
void swiglu_forward(T* out, const T* h13, int N, int F, float* row_amax) {
  swiglu_forward_fp8(out, h13, N, F, row_amax, nullptr, nullptr);
}

template <class T>
void swiglu_backward(T* dh13, const T* dout, const T* h13, int N, int F, float* row_amax) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* gate = h13 + (size_t)n * 2 * F;
    const T* up = gate + F;
    const T* d = dout + (size_t)n * F;
    T* dgate = dh13 + (size_t)n * 2 * F;
    T* dup = dgate + F;
#pragma omp simd
    for (int i = 0; i < F; i++) {
      const float g = to_float(gate[i]), u = to_float(up[i]), di = to_float(d[i]);
      const float sigmoid = 1.0f / (1.0f + exp_vectorizable(-g));
      const float silu = g * sigmoid;
      // d silu(g) / dg = sigmoid(g) * (1 + g * (1 - sigmoid(g)))
      store(dgate + i, di * u * sigmoid * (1.0f + g * (1.0f - sigmoid)));
      store(dup + i, di * silu);
    }
    if (row_amax) row_amax[n] = fp8_amax_of(dgate, 2 * (size_t)F);
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(swiglu_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(swiglu_forward_fp8);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(swiglu_backward);

}  // namespace llm::cpu
