// AdamW slice updates (per-tensor weight decay) and the LR schedule.
#include "model/optimizer.h"

#include <algorithm>
#include <cmath>

namespace llm {

void optimizer_update_elements(const Backend& backend, const TrainingConfig& c,
                               const AdamWStep& step, const TensorSpec& tensor, size_t n,
                               float* params, Bf16* params_bf16, const float* grads, float* m,
                               float* v) {
  const float decay = tensor.weight_decay ? static_cast<float>(c.weight_decay) : 0.0f;
  backend.adamw_update(params, params_bf16, grads, m, v, n, step.lr, static_cast<float>(c.beta1),
                       static_cast<float>(c.beta2), static_cast<float>(c.adam_eps), decay,
                       step.grad_scale, step.t);
}

void optimizer_update_slice(const Backend& backend, const ParameterLayout& layout,
                            const TrainingConfig& c, const AdamWStep& step, int unit, size_t begin,
                            size_t end, float* params, Bf16* params_bf16, const float* grads,
                            float* m, float* v) {
  for (int ti : layout.units.at(unit).tensors) {
    const TensorSpec& t = layout.tensors[ti];
    size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    size_t at = lo - begin;
    optimizer_update_elements(backend, c, step, t, hi - lo, params + at,
                              params_bf16 ? params_bf16 + at : nullptr, grads + at, m + at, v + at);
  }
}

float lr_at_step(const TrainingConfig& c, int step) {
  const double peak = c.lr, floor = c.lr * c.min_lr_ratio;
  if (step < c.warmup_steps) return static_cast<float>(peak * (step + 1) / c.warmup_steps);
  if (c.lr_schedule == LrSchedule::constant) return static_cast<float>(peak);
  int decay_steps = c.steps - c.warmup_steps;
  double progress = decay_steps <= 1 ? 1.0 : double(step - c.warmup_steps) / (decay_steps - 1);
  progress = std::clamp(progress, 0.0, 1.0);
  double shape = c.lr_schedule == LrSchedule::cosine ? 0.5 * (1.0 + std::cos(M_PI * progress))
                                                     : 1.0 - progress;
  return static_cast<float>(floor + (peak - floor) * shape);
}

float clip_scale(float grad_norm, float clip) {
  if (clip <= 0 || !(grad_norm > clip)) return 1.0f;
  return clip / grad_norm;
}

}  // namespace llm
