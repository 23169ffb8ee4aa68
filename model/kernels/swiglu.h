// SwiGLU gating of the Llama MLP: out = silu(gate) * up, where the fused
// up-projection output holds [gate | up] per row; storage type T (float or
// Bf16), fp32 math rounded once on store.
#pragma once

#include "base/storage_types.h"

namespace llm::cpu {

// h13 (N, 2F): row n = [gate (F) | up (F)]; out (N, F) = silu(gate) * up.
template <class T>
void swiglu_forward(T* out, const T* h13, int N, int F);

// dh13 (N, 2F) is overwritten with [d gate | d up]; dout (N, F).
template <class T>
void swiglu_backward(T* dh13, const T* dout, const T* h13, int N, int F);

}  // namespace llm::cpu

// CUDA twins (swiglu.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void swiglu_forward(T* out, const T* h13, int N, int F);
template <class T>
void swiglu_backward(T* dh13, const T* dout, const T* h13, int N, int F);

}  // namespace llm::cuda
