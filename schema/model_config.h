// The [model] table: the architecture's keys (config.h's precedence and
// rules apply).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "schema/key_rules.h"
#include "schema/key_types.h"

namespace llm {

struct ModelConfig {
  // What a changed key does on resume, unless the key says otherwise.
  static constexpr OnResume kOnResume = OnResume::changes_model;
  int dim = 256;
  int n_layers = 4;
  int n_heads = 4;
  int n_kv_heads = 4;
  int head_dim = 0;  // 0: dim / n_heads (resolved_head_dim)
  int ffn_dim = 768;
  int vocab_size = 512;
  double rope_theta = 10000.0;
  double rope_scaling_factor = 1.0;  // 1: no scaling
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int rope_original_context = 8192;
  double norm_eps = 1e-5;
  bool tie_embeddings = true;
  bool qk_norm = false;
  bool qkv_bias = false;
  double init_std = 0.02;
  std::string init_from = "";

  // The head dim every shape uses: head_dim, or dim / n_heads when it is 0.
  int resolved_head_dim() const { return head_dim > 0 ? head_dim : dim / n_heads; }

  template <class V>
  void visit_fields(V&& v) {
    v("dim", dim, "hidden size (width of the residual stream)", kPositive);
    v("n_layers", n_layers, "number of transformer blocks", kPositive);
    v("n_heads", n_heads, "query heads per attention layer", kPositive);
    v("n_kv_heads", n_kv_heads, "key/value heads (grouped-query attention); divides n_heads",
      kPositive);
    v("head_dim", head_dim,
      "width of each query, key and value head; 0: dim / n_heads (Qwen3-0.6B, 4B and 32B set "
      "128)",
      at_least(0));
    v("ffn_dim", ffn_dim, "hidden size of the SwiGLU MLP", kPositive);
    v("vocab_size", vocab_size, "vocabulary size; every token id must be below it", at_least(2));
    v("rope_theta", rope_theta, "RoPE base frequency", kPositive);
    v("rope_scaling_factor", rope_scaling_factor,
      "Llama 3.1's RoPE scaling (rope_type llama3): the slowest frequencies are divided by it; "
      "1: off",
      at_least(1));
    v("rope_low_freq_factor", rope_low_freq_factor,
      "with rope_scaling_factor: wavelengths above rope_original_context / this are scaled fully",
      kPositive);
    v("rope_high_freq_factor", rope_high_freq_factor,
      "with rope_scaling_factor: wavelengths below rope_original_context / this are kept; "
      "above rope_low_freq_factor",
      kPositive);
    v("rope_original_context", rope_original_context,
      "with rope_scaling_factor: the context of the unscaled model "
      "(original_max_position_embeddings)",
      kPositive);
    v("norm_eps", norm_eps, "epsilon inside RMSNorm", kUnitOpen);
    v("tie_embeddings", tie_embeddings, "share the token embedding with the LM head");
    v("qk_norm", qk_norm, "RMSNorm of each query and key head before RoPE (Qwen3, OLMo-2)");
    v("qkv_bias", qkv_bias, "a bias on the query, key and value projections (Qwen2, Qwen2.5)");
    v("init_std", init_std, "std of the normal init of weight matrices", kPositive);
    v("init_from", init_from,
      "start from Hugging Face Llama, Qwen2 or Qwen3 weights: their directory, config.json, "
      ".safetensors file or model.safetensors.index.json; its config.json gives every model key "
      "left unset, and one set must agree",
      OnResume::same_trajectory);
  }
};

}  // namespace llm
