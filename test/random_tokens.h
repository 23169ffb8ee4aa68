// Token ids drawn uniformly from [0, vocab) by the project's seeded RNG:
// the inputs and targets of the model tests' micro-batches.
#pragma once

#include <cstdint>
#include <vector>

#include "base/rng.h"

namespace llm {

inline std::vector<int32_t> random_tokens(int n, int vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = static_cast<int32_t>(rng.next_below(vocab));
  return out;
}

}  // namespace llm
