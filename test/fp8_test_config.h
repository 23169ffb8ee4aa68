// The small model the FP8 tests train: three blocks, grouped-query
// attention, weights large enough (init_std 0.3) that FP8's scales matter.
#pragma once

#include "schema/config.h"

namespace llm::test_support {

inline Config fp8_test_config(int seed) {
  Config c;
  c.path = "test";
  c.model.dim = 32;
  c.model.n_layers = 3;
  c.model.n_heads = 2;
  c.model.n_kv_heads = 1;
  c.model.ffn_dim = 48;
  c.model.vocab_size = 29;
  c.model.init_std = 0.3;
  c.training.seed = seed;
  c.training.precision = Precision::fp8;
  c.data.train = "unused";
  return c;
}

}  // namespace llm::test_support
