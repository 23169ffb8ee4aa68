// AdamW on fp32 master weights (optionally writing their bf16 compute copy in
// the same pass), and the squared-norm reduction used for global gradient
// clipping.
// Invariant: both are elementwise over a contiguous range, so a sharded
// optimizer calls them on its slice and gets the same bits as an unsharded one;
// the bf16 copy is the bits cast_f32_to_bf16 would give (round to nearest
// even); sum_squares sums fixed-size chunks in a fixed order (thread-count
// independent) and, like every op, is queued: it writes its result into the
// backend's memory and never waits for the device.
#pragma once

#include <cstddef>

#include "base/bf16.h"

namespace llm::cpu {

// g = grads * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// params -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * params),
// with m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t), t >= 1 the step number;
// params_bf16 (n elements, or null for none) = the updated params rounded to bf16.
void adamw_update(float* params, Bf16* params_bf16, const float* grads, float* m, float* v,
                  size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                  float grad_scale, int t);

// *result = sum of x[i]^2 accumulated in double (result in the backend's memory).
void sum_squares(double* result, const float* x, size_t n);

}  // namespace llm::cpu

// CUDA twins (adamw.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void adamw_update(float* params, Bf16* params_bf16, const float* grads, float* m, float* v,
                  size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                  float grad_scale, int t);
void sum_squares(double* result, const float* x, size_t n);

}  // namespace llm::cuda
