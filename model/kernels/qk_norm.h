// QK-norm (as in Qwen3 and OLMo-2): RMSNorm of each query and key head over
// its D values, with one gain per head kind (q_weight, k_weight), on the
// fused qkv rows; the value heads pass through. Storage type T (float or
// Bf16); rstd and the gain gradients are fp32 in both.
// Layout: each of the N rows of inp, out, dout and dinp is ((H + 2 KV) * D)
// values, [H q heads | KV k heads | KV v heads] of D each.
// RoPE in the same pass (rope.h's RopeAngles; cos null: none): forward
// rotates each q and k head as it writes it, backward turns dout's q and k
// heads back before the norm's backward, so the attention part skips its own
// RoPE (docs/architecture.md, "A block's parts").
// Invariants: the math is RMSNorm's (rmsnorm.h) per head; forward saves rstd
// (one float per q and k head) so backward never recomputes it; backward
// overwrites dinp and accumulates (+=) the gain gradients in an order fixed by
// the shape alone; with RoPE the bits are those of the composition (forward:
// qk_norm then rope_forward; backward: rope_backward then qk_norm), each
// value rounded to T where the composition stores it.
#pragma once

#include "base/storage_types.h"
#include "model/kernels/rope.h"

namespace llm::cpu {

// out's q heads = RMSNorm(q head) * q_weight (D), k heads likewise with
// k_weight, each then rotated by rope's angles when rope.cos is set, v heads
// copied bit for bit; rstd (N, H + KV) = 1 / sqrt(mean(x^2) + eps) of each q
// then k head. out and inp do not alias.
template <class T>
void qk_norm_forward(T* out, float* rstd, const T* inp, const T* q_weight, const T* k_weight, int N,
                     int H, int KV, int D, float eps, RopeAngles rope);

// dinp = d(loss)/d(inp) (overwritten): the RMSNorm input gradient on q and k
// heads (with rope.cos set, dout is the gradient of the rotated heads), dout
// copied bit for bit on v heads. dinp and dout do not alias. dq_weight, dk_weight (D) +=
// d(loss)/d(gain), summed over rows and heads in (row, head) order.
template <class T>
void qk_norm_backward(T* dinp, float* dq_weight, float* dk_weight, const T* dout, const T* inp,
                      const T* q_weight, const T* k_weight, const float* rstd, int N, int H, int KV,
                      int D, RopeAngles rope);

}  // namespace llm::cpu

// CUDA twins (qk_norm.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void qk_norm_forward(T* out, float* rstd, const T* inp, const T* q_weight, const T* k_weight, int N,
                     int H, int KV, int D, float eps, RopeAngles rope);
template <class T>
void qk_norm_backward(T* dinp, float* dq_weight, float* dk_weight, const T* dout, const T* inp,
                      const T* q_weight, const T* k_weight, const float* rstd, int N, int H, int KV,
                      int D, RopeAngles rope);

}  // namespace llm::cuda
