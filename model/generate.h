// Text generation from a trained model with a key/value cache: the prompt is
// run once (prefill), then each new token is one decode step at its position,
// so a token costs one token's forward, not the whole prefix's. Several
// samples of one prompt decode together as a batch. Each next token is drawn
// from the logits with temperature, top-k and top-p (nucleus) filtering, from
// one seeded RNG, so the same options give the same samples.
// Invariant: with temperature 0 (greedy) the tokens are the argmax of the
// model's own forward() over the whole sequence at every step (the cache only
// saves the recomputation; test_generate checks it).
#pragma once

#include <cstdint>
#include <vector>

#include "model/transformer.h"
#include "model/unit_provider.h"

namespace llm {

struct SamplingOptions {
  int max_new_tokens = 64;
  float temperature = 0.8f;  // 0: greedy (argmax)
  int top_k = 40;            // 0: no top-k cut
  float top_p = 1.0f;  // keep the fewest likeliest tokens whose probability reaches top_p; 1: all
  uint64_t seed = 0;
  int stop_token = -1;  // a sample ends after emitting it (e.g. EOS); -1: none
};

// The next token from one row of logits (V values): argmax when temperature
// is 0, else a draw from the filtered, tempered softmax with `uniform` in [0, 1).
int32_t sample_token(const float* logits, int V, const SamplingOptions& options, double uniform);

// `samples` continuations of `prompt` (at least one token), each at most
// max_new_tokens long and ending early at stop_token; stops too when the
// model's key/value cache (Transformer::reserve_kv_cache, for at least
// `samples` sequences) is full: prompt and continuation never exceed its
// capacity. Returns the new tokens of each sample. A collective over the
// model's tensor and pipeline groups.
std::vector<std::vector<int32_t>> generate(Transformer& model, UnitProvider& units,
                                           const std::vector<int32_t>& prompt, int samples,
                                           const SamplingOptions& options);

}  // namespace llm
