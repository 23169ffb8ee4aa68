// What the generation suites share (test_generate.cpp on the CPU,
// gpu_test_generate.cpp on CUDA): a small random model served by
// InferenceParams on any backend, with a key/value cache for two samples, and
// the check that its cached decode gives forward()'s logits over the whole
// sequence at every position.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/transformer.h"
#include "parallel/sharding_engine.h"
#include "commands/inference_params.h"

namespace llm::test_support {

inline constexpr int kGenerationContext = 24;
inline const std::vector<int32_t> kGenerationPrompt = {3, 17, 42, 8, 8, 60};

// qk_norm: Qwen3's kind, whose QK-norm applies RoPE (from the decode
// position when decoding) in its own pass; qkv_bias: Qwen2's, whose bias pass
// applies it (when no QK-norm follows).
inline Config generation_config(Precision precision, bool qk_norm = false, bool qkv_bias = false) {
  Config c;
  c.path = "test";
  c.model.dim = 32;
  c.model.n_layers = 2;
  c.model.n_heads = 4;
  c.model.n_kv_heads = 2;
  c.model.ffn_dim = 48;
  c.model.vocab_size = 64;
  c.model.init_std = 0.2;  // logits spread enough that argmaxes are not near-ties
  c.training.seed = 11;
  c.training.precision = precision;
  c.model.qk_norm = qk_norm;
  c.model.qkv_bias = qkv_bias;
  c.data.train = "unused";
  return c;
}

// The config's seeded initial parameters (a CPU training engine's).
inline std::vector<float> initial_params(const Config& config) {
  const ParameterLayout layout = layout_build(config.model);
  Topology topology(comm_world(), config.parallel);
  ShardingEngine engine(layout, config, backend_cpu(), topology);
  return engine.gather_all_params();
}

// A randomly initialized model on `backend` with a cache for 2 samples.
struct Generator {
  Config config;
  std::unique_ptr<Transformer> model;
  InferenceParams params;

  explicit Generator(const Backend& backend, Precision precision = Precision::fp32,
                     bool qk_norm = false, bool qkv_bias = false)
      : config(generation_config(precision, qk_norm, qkv_bias)),
        model(Transformer::create(config.model, 2, kGenerationContext, backend, {}, precision)),
        params(model->layout(), initial_params(config), backend, precision) {
    model->reserve_kv_cache(2, kGenerationContext);
  }

  std::vector<float> logits(int row) {
    std::vector<float> out(config.model.vocab_size);
    model->logits_row(params, row, out.data());
    return out;
  }
  // forward() over the whole of `tokens` (one sequence): its last row's logits.
  std::vector<float> full_forward_logits(const std::vector<int32_t>& tokens) {
    const int T = static_cast<int>(tokens.size());
    model->forward(params, tokens.data(), nullptr, 1, T);
    return logits(T - 1);
  }
};

// Prefills two samples of the prompt, then decodes one (fixed) token at a
// time to the end of the context; at every position the cached decode's
// logits (of the second sample) are within tolerance x max |logit| of the
// full forward's.
inline void expect_decode_matches_forward(const Backend& backend, Precision precision,
                                          double tolerance, bool qk_norm = false,
                                          bool qkv_bias = false) {
  Generator g(backend, precision, qk_norm, qkv_bias);
  std::vector<int32_t> tokens = kGenerationPrompt;
  std::vector<int32_t> batch(tokens);
  batch.insert(batch.end(), tokens.begin(), tokens.end());
  g.model->decode(g.params, batch.data(), 2, static_cast<int>(tokens.size()), 0);
  std::vector<float> cached = g.logits(2 * static_cast<int>(tokens.size()) - 1);
  for (int step = 0; tokens.size() < static_cast<size_t>(kGenerationContext); ++step) {
    const std::vector<float> full = g.full_forward_logits(tokens);
    double scale = 0;
    for (float v : full) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    for (size_t v = 0; v < full.size(); ++v) {
      ASSERT_NEAR(cached[v], full[v], tolerance * scale)
          << "position " << tokens.size() - 1 << " logit " << v;
    }
    tokens.push_back(static_cast<int32_t>((7 * step + 5) % g.config.model.vocab_size));
    const int32_t next[2] = {tokens.back(), tokens.back()};
    g.model->decode(g.params, next, 2, 1, static_cast<int>(tokens.size()) - 1);
    cached = g.logits(1);
  }
}

}  // namespace llm::test_support
