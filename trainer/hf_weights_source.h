// Hugging Face weights as the sharding engine's source of parameters: each
// rank reads only the slices it holds (model.init_from, and the tests that
// compare our forward with transformers'). Moments are not read: they start
// at zero, as for a fresh optimizer.
#pragma once

#include "interop/hf_llama.h"
#include "parallel/sharding_engine.h"

namespace llm {

class HfWeightsSource : public StateSource {
 public:
  explicit HfWeightsSource(const HfWeights& weights) : weights_(weights) {}
  void read(int unit, size_t begin, size_t count, float* params, float*, float*) override {
    if (params) weights_.read(unit, begin, count, params);
  }

 private:
  const HfWeights& weights_;
};

}  // namespace llm
