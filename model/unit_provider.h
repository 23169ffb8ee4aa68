// The seam between the model and parallelism. The model is written as if for
// one device and asks a UnitProvider for each unit's parameters right before
// using them and for the buffer its gradient accumulates into; a sharding
// engine implements this to gather, free and reduce units at the right time.
// Contract:
//  - acquire_params returns the unit's compute parameters in the model's
//    precision (float or Bf16 elements; the provider is built for the same
//    precision); acquire / release come in balanced pairs per pass; the
//    pointer is valid until the matching release (a unit may be acquired
//    again later in the same pass, e.g. a tied embedding used by the head).
//  - acquire_grads may be called several times per backward pass; the model
//    accumulates (+=) into the returned full-size fp32 buffer.
//  - release_grads(unit) is called exactly once per unit per backward pass,
//    after the last write to that unit's gradient.
//  - params_version() changes whenever any unit's compute parameters may
//    have changed since it last returned; while it returns the same value
//    the parameters are the same, so the model may keep what it derived from
//    them (FP8 codes of the block weights, cast once per optimizer step).
#pragma once

#include <cstdint>

namespace llm {

enum class Pass { forward, backward };

class UnitProvider {
 public:
  virtual ~UnitProvider() = default;
  virtual const void* acquire_params(int unit, Pass pass) = 0;
  virtual void release_params(int unit, Pass pass) = 0;
  virtual float* acquire_grads(int unit) = 0;
  virtual void release_grads(int unit) = 0;
  virtual uint64_t params_version() const = 0;
};

}  // namespace llm
