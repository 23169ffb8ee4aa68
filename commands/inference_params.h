// The parameters of a model that only runs forward (generation): every unit
// in the compute precision, resident on the backend's device, served through
// UnitProvider. No gradients, no optimizer state, no sharding: a quarter of
// what a training engine holds per parameter in fp32 (an eighth in bf16).
// Invariant: filled once at construction; acquire_params never communicates
// or copies; asking for gradients is an error.
#pragma once

#include <vector>

#include "schema/config.h"
#include "model/backend.h"
#include "model/layout.h"
#include "model/unit_provider.h"
#include "device/arena.h"

namespace llm {

class InferenceParams : public UnitProvider {
 public:
  // params: every unit's fp32 parameters concatenated in unit order
  // (layout.total_numel floats), as checkpoint_read_params returns them.
  InferenceParams(const ParameterLayout& layout, const std::vector<float>& params,
                  const Backend& backend, Precision precision);

  const void* acquire_params(int unit, Pass) override { return units_.at(unit); }
  void release_params(int, Pass) override {}
  float* acquire_grads(int unit) override;
  void release_grads(int unit) override;
  uint64_t params_version() const override { return 0; }  // filled once

 private:
  Arena arena_;
  std::vector<void*> units_;  // each unit's parameters in the compute precision
};

}  // namespace llm
