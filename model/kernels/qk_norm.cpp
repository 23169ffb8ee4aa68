// QK-norm on the CPU: RMSNorm (cpu_rmsnorm_rows.h's row math) of each q and k
// head of the fused qkv rows, v heads copied; one row of heads per work item.
// Invariant: each gain gradient sums its heads in (row, head) order inside
// fixed column blocks, so its bits do not depend on the thread count.
#include "model/kernels/qk_norm.h"

#include <algorithm>
#include <cstddef>

#include "model/kernels/cpu_rmsnorm_rows.h"

namespace llm::cpu {

template <class T>
void qk_norm_forward(T* out, float* rstd, const T* inp, const T* q_weight, const T* k_weight, int N,
                     int H, int KV, int D, float eps) {
  const int normed = H + KV;                      // q and k heads per row
  const size_t width = (size_t)(H + 2 * KV) * D;  // values per row
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* x = inp + n * width;
    T* y = out + n * width;
    for (int h = 0; h < normed; h++) {
      const size_t head = (size_t)h * D;
      rstd[(size_t)n * normed + h] =
          rmsnorm_row_forward(y + head, x + head, h < H ? q_weight : k_weight, D, eps);
    }
    std::copy(x + (size_t)normed * D, x + width, y + (size_t)normed * D);  // v heads
  }
}

template <class T>
void qk_norm_backward(T* dinp, float* dq_weight, float* dk_weight, const T* dout, const T* inp,
                      const T* q_weight, const T* k_weight, const float* rstd, int N, int H, int KV,
                      int D) {
  const int normed = H + KV;
  const size_t width = (size_t)(H + 2 * KV) * D;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const T* dy = dout + n * width;
    T* dx = dinp + n * width;
    for (int h = 0; h < normed; h++) {
      const size_t head = (size_t)h * D;
      rmsnorm_row_backward</*kAccumulate=*/false>(dx + head, dy + head, inp + n * width + head,
                                                  h < H ? q_weight : k_weight,
                                                  rstd[(size_t)n * normed + h], D);
    }
    std::copy(dy + (size_t)normed * D, dy + width, dx + (size_t)normed * D);  // v heads
  }

  // Head r of the `count` heads from `first` on, over all rows in order.
  auto heads = [&](int first, int count) {
    return [=](int r) {
      const int n = r / count, h = first + r % count;
      const size_t at = n * width + (size_t)h * D;
      return NormRow<T>{inp + at, dout + at, rstd[(size_t)n * normed + h]};
    };
  };
  accumulate_gain_gradient<T>(dq_weight, N * H, D, heads(0, H));
  accumulate_gain_gradient<T>(dk_weight, N * KV, D, heads(H, KV));
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(qk_norm_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(qk_norm_backward);

}  // namespace llm::cpu
