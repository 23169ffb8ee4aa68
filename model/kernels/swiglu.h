// SwiGLU gating of the Llama MLP: out = silu(gate) * up, where the fused
// up-projection output holds [gate | up] per row.
#pragma once

namespace llm::cpu {

// h13 (N, 2F): row n = [gate (F) | up (F)]; out (N, F) = silu(gate) * up.
void swiglu_forward(float* out, const float* h13, int N, int F);

// dh13 (N, 2F) is overwritten with [d gate | d up]; dout (N, F).
void swiglu_backward(float* dh13, const float* dout, const float* h13, int N, int F);

}  // namespace llm::cpu
