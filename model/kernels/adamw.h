// AdamW on fp32 master weights, and the squared-norm reduction used for
// global gradient clipping.
// Invariant: both are elementwise over a contiguous range, so a sharded
// optimizer calls them on its slice and gets the same bits as an unsharded one;
// sum_squares sums fixed-size chunks in a fixed order (thread-count independent).
#pragma once

#include <cstddef>

namespace llm::cpu {

// g = grads * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// params -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * params),
// with m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t), t >= 1 the step number.
void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t);

// sum of x[i]^2 accumulated in double.
double sum_squares(const float* x, size_t n);

}  // namespace llm::cpu

// CUDA twins (adamw.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t);
// Waits for the compute stream: the one op that returns a host value.
double sum_squares(const float* x, size_t n);

}  // namespace llm::cuda
