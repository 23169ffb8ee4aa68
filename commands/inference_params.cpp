// Unit parameters uploaded once in the compute precision (see inference_params.h).
#include "commands/inference_params.h"

#include "model/kernels/cast.h"
#include "base/bf16.h"
#include "base/error.h"

namespace llm {

InferenceParams::InferenceParams(const ParameterLayout& layout, const std::vector<float>& params,
                                 const Backend& backend, Precision precision) {
  LLM_CHECK(params.size() == layout.total_numel,
            "inference parameters: {} values for a model of {}", params.size(), layout.total_numel);
  const size_t element = stores_bf16(precision) ? sizeof(Bf16) : sizeof(float);
  BufferPlan plan;
  units_.resize(layout.units.size());
  for (size_t u = 0; u < units_.size(); ++u)
    plan.add_bytes(units_[u], layout.units[u].numel * element);
  arena_ = Arena("inference parameters", plan.bytes(), *backend.memory);
  plan.bind(arena_);
  std::vector<Bf16> rounded;
  const float* values = params.data();
  for (size_t u = 0; u < units_.size(); values += layout.units[u++].numel) {
    const UnitSpec& unit = layout.units[u];
    if (stores_bf16(precision)) {
      rounded.resize(unit.numel);
      cpu::cast_f32_to_bf16(rounded.data(), values, unit.numel);
      backend.memory->to_device(units_[u], rounded.data(), unit.numel * sizeof(Bf16));
    } else {
      backend.memory->to_device(units_[u], values, unit.numel * sizeof(float));
    }
  }
}

float* InferenceParams::acquire_grads(int unit) {
  LLM_CHECK(false, "inference parameters have no gradients (unit {})", unit);
  return nullptr;
}

void InferenceParams::release_grads(int unit) {
  LLM_CHECK(false, "inference parameters have no gradients (unit {})", unit);
}

}  // namespace llm
