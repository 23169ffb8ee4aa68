// AdamW over the unit layout, and the learning-rate schedule.
// Invariant: the update of an element depends only on that element's
// parameter, gradient and moments (plus per-tensor weight decay), so updating
// a unit slice by slice (as sharded optimizers do) gives the same bits as
// updating it whole.
#pragma once

#include <cstddef>

#include "schema/config.h"
#include "model/backend.h"
#include "model/layout.h"

namespace llm {

struct AdamWStep {
  float lr;
  float grad_scale;  // multiplies every gradient first (clipping)
  int t;             // 1-based step number for bias correction
};

// Updates n elements of `tensor` (any n of them, e.g. chosen columns packed
// together): its weight decay, config's betas and epsilon, step's lr, scale
// and t. params_bf16, unless null, receives the updated params in bf16.
void optimizer_update_elements(const Backend& backend, const TrainingConfig& config,
                               const AdamWStep& step, const TensorSpec& tensor, size_t n,
                               float* params, Bf16* params_bf16, const float* grads, float* m,
                               float* v);

// Updates elements [begin, end) of `unit`; params, grads, m and v point at
// element `begin` of that unit's slice, and so does params_bf16, which (unless
// null) receives the updated params rounded to bf16 in the same pass.
void optimizer_update_slice(const Backend& backend, const ParameterLayout& layout,
                            const TrainingConfig& config, const AdamWStep& step, int unit,
                            size_t begin, size_t end, float* params, Bf16* params_bf16,
                            const float* grads, float* m, float* v);

// Learning rate of optimizer step `step` (0-based): linear warmup to lr, then
// cosine / linear decay to lr * min_lr_ratio at the last step, or constant.
float lr_at_step(const TrainingConfig& config, int step);

// Scale that clips a gradient of global norm `grad_norm` to `clip` (1 if off).
float clip_scale(float grad_norm, float clip);

}  // namespace llm
