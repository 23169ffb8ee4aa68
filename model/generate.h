// Text generation from a trained model: repeated full forwards over a growing
// context (at most the model's activation length), sampling each next token
// with temperature and top-k from a seeded RNG, so a sample is reproducible.
#pragma once

#include <cstdint>
#include <vector>

#include "model/transformer.h"
#include "model/unit_provider.h"

namespace llm {

struct SamplingOptions {
  int max_new_tokens = 64;
  float temperature = 0.8f;
  int top_k = 40;
  uint64_t seed = 0;
};

// Returns prompt followed by the generated tokens.
std::vector<int32_t> generate(Transformer& model, UnitProvider& units, std::vector<int32_t> prompt,
                              int max_context, const SamplingOptions& options);

}  // namespace llm
