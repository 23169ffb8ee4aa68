// SwiGLU gating of the Llama MLP: out = silu(gate) * up, where the fused
// up-projection output holds [gate | up] per row; storage type T (float or
// Bf16), fp32 math rounded once on store. Under FP8 delayed scaling the
// forward writes the next matmul's e4m3 codes beside its output
// (swiglu_forward_fp8).
#pragma once

#include <cstdint>

#include "base/fp8.h"
#include "base/storage_types.h"

namespace llm::cpu {

// h13 (N, 2F): row n = [gate (F) | up (F)]; out (N, F) = silu(gate) * up;
// row_amax (N), when not null: each row's largest |out| as stored
// (fp8_amax_of of the row, base/fp8.h: NaN if the row holds one), for the
// FP8 matmul that reads out.
template <class T>
void swiglu_forward(T* out, const T* h13, int N, int F, float* row_amax);

// swiglu_forward, and in the same pass codes (N, F) = fp8_cast_transpose's
// e4m3 codes of out (as stored) with `scale` (row-major); row_amax may be null.
template <class T>
void swiglu_forward_fp8(T* out, const T* h13, int N, int F, float* row_amax, uint8_t* codes,
                        const Fp8Scale* scale);

// dh13 (N, 2F) is overwritten with [d gate | d up]; dout (N, F); row_amax
// (N), when not null: each row's largest |dh13| as stored, as the forward's.
template <class T>
void swiglu_backward(T* dh13, const T* dout, const T* h13, int N, int F, float* row_amax);

}  // namespace llm::cpu

// CUDA twins (swiglu.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void swiglu_forward(T* out, const T* h13, int N, int F, float* row_amax);
template <class T>
void swiglu_forward_fp8(T* out, const T* h13, int N, int F, float* row_amax, uint8_t* codes,
                        const Fp8Scale* scale);
template <class T>
void swiglu_backward(T* dh13, const T* dout, const T* h13, int N, int F, float* row_amax);

}  // namespace llm::cuda
