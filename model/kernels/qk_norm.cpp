// QK-norm on the CPU: RMSNorm (cpu_rmsnorm_rows.h's row math) of each q and k
// head of the fused qkv rows, then RoPE (cpu_rope_head.h) when asked, v heads
// copied; one row of heads per work item.
// Invariants: each gain gradient sums its heads in (row, head) order inside
// fixed column blocks, so its bits do not depend on the thread count; the
// rotation is rope.cpp's on the stored values, so the fused pass is bit for
// bit the composition qk_norm then rope_forward (backward: rope_backward then
// qk_norm).
#include "model/kernels/qk_norm.h"

#include <algorithm>
#include <cstddef>

#include "model/kernels/cpu_rmsnorm_rows.h"
#include "model/kernels/cpu_rope_head.h"

namespace llm::cpu {

template <class T>
void qk_norm_forward(T* out, float* rstd, const T* inp, const T* q_weight, const T* k_weight, int N,
                     int H, int KV, int D, float eps, RopeAngles rope) {
  const int normed = H + KV;                      // q and k heads per row
  const size_t width = (size_t)(H + 2 * KV) * D;  // values per row
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* x = inp + n * width;
    T* y = out + n * width;
    const size_t angles = rope.cos ? (size_t)rope_position(rope.positions, n, rope.T) * (D / 2) : 0;
    for (int h = 0; h < normed; h++) {
      const size_t head = (size_t)h * D;
      rstd[(size_t)n * normed + h] =
          rmsnorm_row_forward(y + head, x + head, h < H ? q_weight : k_weight, D, eps);
      if (rope.cos) rope_rotate_head(y + head, rope.cos + angles, rope.sin + angles, 1.0f, D);
    }
    std::copy(x + (size_t)normed * D, x + width, y + (size_t)normed * D);  // v heads
  }
}

template <class T>
void qk_norm_backward(T* dinp, float* dq_weight, float* dk_weight, const T* dout, const T* inp,
                      const T* q_weight, const T* k_weight, const float* rstd, int N, int H, int KV,
                      int D, RopeAngles rope) {
  const int normed = H + KV;
  const size_t width = (size_t)(H + 2 * KV) * D;
  // The gradient of the normed heads: dout, or with RoPE dout turned back
  // into dinp (rounded as rope_backward stores it), then normed in place.
  const T* dnormed = rope.cos ? dinp : dout;
  if (rope.cos) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
      const size_t angles = (size_t)rope_position(rope.positions, n, rope.T) * (D / 2);
      std::copy(dout + n * width, dout + n * width + (size_t)normed * D, dinp + n * width);
      for (int h = 0; h < normed; h++)
        rope_rotate_head(dinp + n * width + (size_t)h * D, rope.cos + angles, rope.sin + angles,
                         -1.0f, D);
    }
  }

  // Head r of the `count` heads from `first` on, over all rows in order.
  auto heads = [&](int first, int count) {
    return [=](int r) {
      const int n = r / count, h = first + r % count;
      const size_t at = n * width + (size_t)h * D;
      return NormRow<T>{inp + at, dnormed + at, rstd[(size_t)n * normed + h]};
    };
  };
  accumulate_gain_gradient<T>(dq_weight, N * H, D, heads(0, H));
  accumulate_gain_gradient<T>(dk_weight, N * KV, D, heads(H, KV));

#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* dy = dnormed + n * width;
    T* dx = dinp + n * width;
    for (int h = 0; h < normed; h++) {
      const size_t head = (size_t)h * D;
      // dx may be dy (with RoPE): each element is read before it is written.
      rmsnorm_row_backward</*kAccumulate=*/false>(dx + head, dy + head, inp + n * width + head,
                                                  h < H ? q_weight : k_weight,
                                                  rstd[(size_t)n * normed + h], D);
    }
    std::copy(dout + n * width + (size_t)normed * D, dout + (n + 1) * width,
              dx + (size_t)normed * D);  // v heads
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(qk_norm_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(qk_norm_backward);

}  // namespace llm::cpu
