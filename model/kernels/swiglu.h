// SwiGLU gating of the Llama MLP: out = silu(gate) * up, where the fused
// up-projection output holds [gate | up] per row; fp32 or bf16 (`_bf16`)
// storage, fp32 math rounded once on store.
#pragma once

#include "runtime/bf16.h"

namespace llm::cpu {

// h13 (N, 2F): row n = [gate (F) | up (F)]; out (N, F) = silu(gate) * up.
void swiglu_forward(float* out, const float* h13, int N, int F);
void swiglu_forward_bf16(Bf16* out, const Bf16* h13, int N, int F);

// dh13 (N, 2F) is overwritten with [d gate | d up]; dout (N, F).
void swiglu_backward(float* dh13, const float* dout, const float* h13, int N, int F);
void swiglu_backward_bf16(Bf16* dh13, const Bf16* dout, const Bf16* h13, int N, int F);

}  // namespace llm::cpu

// CUDA twins (swiglu.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void swiglu_forward(float* out, const float* h13, int N, int F);
void swiglu_forward_bf16(Bf16* out, const Bf16* h13, int N, int F);
void swiglu_backward(float* dh13, const float* dout, const float* h13, int N, int F);
void swiglu_backward_bf16(Bf16* dh13, const Bf16* dout, const Bf16* h13, int N, int F);

}  // namespace llm::cuda
