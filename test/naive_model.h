// The Llama model written out naively in double, from the reference ops
// (test/reference_ops.h, plain loops), over parameters held by tensor name:
// its mean cross-entropy and that loss's gradient by central differences.
// Independent of model/: it shares only the tensor names and shapes of the
// layout (embed.weight, layers.<l>.attn.wqkv, ...), which it reads by name.
// Used by test_model.cpp (one forward/backward) and the training-step
// reference (test/reference_training.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "schema/config.h"
#include "model/layout.h"
#include "parallel/sharding_engine.h"
#include "test/reference_ops.h"

namespace llm::naive {

using reference::Vec;
// Parameters by tensor name, as doubles.
using NamedParams = std::map<std::string, Vec>;

// Every tensor of the layout, gathered from the engine (collective when the
// engine shards: every rank calls it).
inline NamedParams named_params(const ParameterLayout& layout, ShardingEngine& engine) {
  NamedParams out;
  std::vector<float> unit;
  int gathered = -1;
  for (const TensorSpec& t : layout.tensors) {
    if (t.unit != gathered) {
      unit.assign(layout.units[t.unit].numel, 0.0f);
      engine.gather_params(t.unit, unit.data());
      gathered = t.unit;
    }
    out[t.name] = Vec(unit.begin() + t.offset, unit.begin() + t.offset + t.numel);
  }
  return out;
}

// Document masking of the naive model: documents start at input tokens equal
// to `token` (none when negative), or, with `token_ends_document`, right
// after them; with `reset_positions` RoPE counts positions from each
// document's start.
struct Documents {
  int32_t token = -1;
  bool reset_positions = false;
  bool token_ends_document = false;
};

// Mean cross-entropy over the kept targets of the B x T: a negative target is
// not trained on (a loss mask dropped it) and counts in neither the sum nor
// the mean.
inline double loss(const ModelConfig& m, const NamedParams& p, const std::vector<int32_t>& inputs,
                   const std::vector<int32_t>& targets, int B, int T, Documents documents = {}) {
  namespace r = reference;
  const int N = B * T, C = m.dim, H = m.n_heads, KV = m.n_kv_heads, D = m.resolved_head_dim(),
            F = m.ffn_dim;
  const int QKV = (H + 2 * KV) * D;
  // Per token: where its document starts in its sequence, and its position.
  std::vector<int32_t> starts(N), positions(N);
  for (int b = 0; b < B; ++b) {
    int start = 0;
    for (int t = 0; t < T; ++t) {
      const int32_t marker =
          documents.token_ends_document ? (t > 0 ? inputs[b * T + t - 1] : -1) : inputs[b * T + t];
      if (marker == documents.token && documents.token >= 0) start = t;
      starts[b * T + t] = start;
      positions[b * T + t] = documents.reset_positions ? t - start : t;
    }
  }
  const bool masked = documents.token >= 0;
  Vec x = r::embedding_forward(inputs, p.at("embed.weight"), N, C);
  for (int l = 0; l < m.n_layers; ++l) {
    std::string pre = "layers." + std::to_string(l);
    Vec xn1 = r::rmsnorm_forward(x, p.at(pre + ".attn_norm.weight"), N, C, m.norm_eps);
    Vec qkv = r::matmul_forward(xn1, p.at(pre + ".attn.wqkv"), N, C, QKV);
    if (m.qkv_bias) qkv = r::row_bias_forward(qkv, p.at(pre + ".attn.bqkv"), N, QKV);
    if (m.qk_norm) {
      qkv = r::qk_norm_forward(qkv, p.at(pre + ".attn.q_norm.weight"),
                               p.at(pre + ".attn.k_norm.weight"), N, H, KV, D, m.norm_eps);
    }
    qkv = r::rope_forward(qkv, N, T, H + KV, D, QKV, m.rope_theta, &positions);
    Vec att = r::attention_forward(qkv, B, T, H, KV, D, nullptr, masked ? &starts : nullptr);
    x = r::residual_forward(x, r::matmul_forward(att, p.at(pre + ".attn.wo"), N, H * D, C));
    Vec xn2 = r::rmsnorm_forward(x, p.at(pre + ".mlp_norm.weight"), N, C, m.norm_eps);
    Vec h13 = r::matmul_forward(xn2, p.at(pre + ".mlp.w13"), N, C, 2 * F);
    Vec g = r::swiglu_forward(h13, N, F);
    x = r::residual_forward(x, r::matmul_forward(g, p.at(pre + ".mlp.w2"), N, F, C));
  }
  Vec xf = r::rmsnorm_forward(x, p.at("norm.weight"), N, C, m.norm_eps);
  const Vec& head = m.tie_embeddings ? p.at("embed.weight") : p.at("lm_head.weight");
  std::vector<int32_t> any_target(targets);  // dropped ones read column 0, then are skipped
  for (int32_t& target : any_target) target = std::max(target, 0);
  Vec losses = r::cross_entropy_forward(r::matmul_forward(xf, head, N, C, m.vocab_size), any_target,
                                        N, m.vocab_size);
  double sum = 0;
  int kept = 0;
  for (int n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    sum += losses[n];
    ++kept;
  }
  return kept > 0 ? sum / kept : 0.0;
}

// Which entries of the gradient a caller computes: those whose running index
// (over every tensor, in name order) i has i % parts == part. The default is
// every entry; ranks that share the work each take one part.
struct GradientPart {
  int part = 0, parts = 1;
};

// d loss / d p for every element of every tensor (of `share`'s entries; the
// others are 0), by central differences with step h (in double, so the
// truncation error ~h^2 is far below fp32 rounding).
inline NamedParams gradient(const ModelConfig& m, NamedParams p, const std::vector<int32_t>& inputs,
                            const std::vector<int32_t>& targets, int B, int T, double h = 1e-5,
                            Documents documents = {}, GradientPart share = {}) {
  NamedParams grads;
  size_t index = 0;
  for (auto& [name, values] : p) {
    Vec& g = grads[name];
    g.assign(values.size(), 0.0);
    for (size_t i = 0; i < values.size(); ++i, ++index) {
      if (static_cast<int>(index % share.parts) != share.part) continue;
      const double saved = values[i];
      values[i] = saved + h;
      const double up = loss(m, p, inputs, targets, B, T, documents);
      values[i] = saved - h;
      const double down = loss(m, p, inputs, targets, B, T, documents);
      values[i] = saved;
      g[i] = (up - down) / (2 * h);
    }
  }
  return grads;
}

}  // namespace llm::naive
