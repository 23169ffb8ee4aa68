// Forward and backward orchestration of the decoder over its units. All math
// is in the backend's kernels; this file only sequences them and asks the
// UnitProvider for parameters and gradient buffers at unit boundaries.
#include "model/transformer.h"

#include "core/error.h"

namespace llm {

Transformer::Transformer(const ModelConfig& config, int max_batch, int max_seq,
                         const Backend& backend)
    : config_(config),
      layout_(layout_build(config)),
      be_(backend),
      max_batch_(max_batch),
      max_seq_(max_seq),
      C_(config.dim),
      H_(config.n_heads),
      KV_(config.n_kv_heads),
      D_(config.dim / config.n_heads),
      F_(config.ffn_dim),
      V_(config.vocab_size),
      L_(config.n_layers),
      QKV_((config.n_heads + 2 * config.n_kv_heads) * (config.dim / config.n_heads)) {
  const UnitSpec& block = layout_.units[layout_.block_unit(0)];
  auto offset = [&](int i) { return layout_.tensors[block.tensors[i]].offset; };
  block_ = {offset(0), offset(1), offset(2), offset(3), offset(4), offset(5)};

  BufferPlan plan = plan_activations(config, max_batch, max_seq, acts_);
  arena_ = Arena("activations", plan.bytes());
  plan.bind(arena_);
  be_.rope_table(acts_.rope_cos, acts_.rope_sin, max_seq, D_, static_cast<float>(config.rope_theta));
}

BufferPlan Transformer::plan_activations(const ModelConfig& c, int B, int T, Activations& a) {
  const size_t N = static_cast<size_t>(B) * T, L = c.n_layers, C = c.dim, F = c.ffn_dim;
  const size_t D = c.dim / c.n_heads, HD = c.n_heads * D, QKV = (c.n_heads + 2 * c.n_kv_heads) * D;
  BufferPlan plan;
  plan.add(a.residual, (L + 1) * N * C);
  plan.add(a.xn1, L * N * C);
  plan.add(a.rstd1, L * N);
  plan.add(a.qkv, L * N * QKV);
  plan.add(a.att, L * N * HD);
  plan.add(a.lse, L * N * c.n_heads);
  plan.add(a.x_mid, L * N * C);
  plan.add(a.xn2, L * N * C);
  plan.add(a.rstd2, L * N);
  plan.add(a.h13, L * N * 2 * F);
  plan.add(a.g, L * N * F);
  plan.add(a.xf, N * C);
  plan.add(a.rstd_f, N);
  plan.add(a.logits, N * c.vocab_size);
  plan.add(a.losses, N);
  plan.add(a.rope_cos, T * D / 2);
  plan.add(a.rope_sin, T * D / 2);
  plan.add(a.dres, N * C);
  plan.add(a.dxn, N * C);
  plan.add(a.dqkv, N * QKV);
  plan.add(a.datt, N * HD);
  plan.add(a.dh13, N * 2 * F);
  plan.add(a.dg, N * F);
  return plan;
}

size_t Transformer::activation_bytes(const ModelConfig& config, int B, int T) {
  Activations unbound{};
  return plan_activations(config, B, T, unbound).bytes();
}

const float* Transformer::head_weight(UnitProvider& units, const float* head_params, Pass pass) {
  if (config_.tie_embeddings) return units.acquire_params(layout_.embed_unit(), pass);
  return head_params + config_.dim;
}

void Transformer::release_head_weight(UnitProvider& units, Pass pass) {
  if (config_.tie_embeddings) units.release_params(layout_.embed_unit(), pass);
}

void Transformer::forward_blocks(UnitProvider& units, const int32_t* inputs, int B, int T) {
  LLM_CHECK(B >= 1 && B <= max_batch_ && T >= 1 && T <= max_seq_,
            "micro-batch ({}, {}) exceeds the activation buffers ({}, {})", B, T, max_batch_,
            max_seq_);
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C_, Nmax = static_cast<size_t>(max_batch_) * max_seq_;
  const float eps = static_cast<float>(config_.norm_eps);
  Activations& a = acts_;

  const float* embed = units.acquire_params(layout_.embed_unit(), Pass::forward);
  be_.embedding_forward(a.residual, inputs, embed, N, C_);
  units.release_params(layout_.embed_unit(), Pass::forward);

  for (int l = 0; l < L_; ++l) {
    const float* p = units.acquire_params(layout_.block_unit(l), Pass::forward);
    const float* x = a.residual + l * Nmax * C_;
    float* xn1 = a.xn1 + l * Nmax * C_;
    float* rstd1 = a.rstd1 + l * Nmax;
    float* qkv = a.qkv + l * Nmax * QKV_;
    float* att = a.att + l * Nmax * H_ * D_;
    float* lse = a.lse + l * Nmax * H_;
    float* x_mid = a.x_mid + l * Nmax * C_;
    float* xn2 = a.xn2 + l * Nmax * C_;
    float* rstd2 = a.rstd2 + l * Nmax;
    float* h13 = a.h13 + l * Nmax * 2 * F_;
    float* g = a.g + l * Nmax * F_;
    float* x_out = a.residual + (l + 1) * Nmax * C_;

    be_.rmsnorm_forward(xn1, rstd1, x, p + block_.attn_norm, N, C_, eps);
    be_.matmul_forward(qkv, xn1, p + block_.wqkv, N, C_, QKV_);
    be_.rope_forward(qkv, a.rope_cos, a.rope_sin, N, T, H_ + KV_, D_, QKV_);
    be_.attention_forward(att, lse, qkv, B, T, H_, KV_, D_);
    be_.matmul_forward(x_mid, att, p + block_.wo, N, H_ * D_, C_);
    be_.residual_forward(x_mid, x_mid, x, NC);

    be_.rmsnorm_forward(xn2, rstd2, x_mid, p + block_.mlp_norm, N, C_, eps);
    be_.matmul_forward(h13, xn2, p + block_.w13, N, C_, 2 * F_);
    be_.swiglu_forward(g, h13, N, F_);
    be_.matmul_forward(x_out, g, p + block_.w2, N, F_, C_);
    be_.residual_forward(x_out, x_out, x_mid, NC);
    units.release_params(layout_.block_unit(l), Pass::forward);
  }

  const int head = layout_.head_unit();
  const float* hp = units.acquire_params(head, Pass::forward);
  be_.rmsnorm_forward(a.xf, a.rstd_f, a.residual + L_ * Nmax * C_, hp, N, C_, eps);
  be_.matmul_forward(a.logits, a.xf, head_weight(units, hp, Pass::forward), N, C_, V_);
  release_head_weight(units, Pass::forward);
  units.release_params(head, Pass::forward);
}

float Transformer::mean_loss(int N) const {
  double sum = 0;
  for (int i = 0; i < N; ++i) sum += acts_.losses[i];
  return static_cast<float>(sum / N);
}

float Transformer::forward(UnitProvider& units, const int32_t* inputs, const int32_t* targets,
                           int B, int T) {
  forward_blocks(units, inputs, B, T);
  if (!targets) return 0.0f;
  be_.cross_entropy_forward(acts_.losses, acts_.logits, targets, B * T, V_);
  return mean_loss(B * T);
}

float Transformer::forward_backward(UnitProvider& units, const int32_t* inputs,
                                    const int32_t* targets, int B, int T, float dloss) {
  forward_blocks(units, inputs, B, T);
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C_, Nmax = static_cast<size_t>(max_batch_) * max_seq_;
  Activations& a = acts_;
  be_.cross_entropy_forward_backward(a.losses, a.logits, targets, N, V_, dloss);

  // Head: final norm and LM head (its weight may be the tied embedding).
  const int head = layout_.head_unit();
  const float* hp = units.acquire_params(head, Pass::backward);
  float* hg = units.acquire_grads(head);
  float* head_weight_grad =
      config_.tie_embeddings ? units.acquire_grads(layout_.embed_unit()) : hg + C_;
  be_.matmul_backward(a.dxn, head_weight_grad, a.logits, a.xf, head_weight(units, hp, Pass::backward),
                      N, C_, V_);
  be_.fill_zero(a.dres, NC);
  be_.rmsnorm_backward(a.dres, hg, a.dxn, a.residual + L_ * Nmax * C_, hp, a.rstd_f, N, C_);
  release_head_weight(units, Pass::backward);
  units.release_params(head, Pass::backward);
  units.release_grads(head);

  for (int l = L_ - 1; l >= 0; --l) {
    const int unit = layout_.block_unit(l);
    const float* p = units.acquire_params(unit, Pass::backward);
    float* gr = units.acquire_grads(unit);
    const float* x = a.residual + l * Nmax * C_;
    const float* xn1 = a.xn1 + l * Nmax * C_;
    const float* rstd1 = a.rstd1 + l * Nmax;
    const float* qkv = a.qkv + l * Nmax * QKV_;
    const float* att = a.att + l * Nmax * H_ * D_;
    const float* lse = a.lse + l * Nmax * H_;
    const float* x_mid = a.x_mid + l * Nmax * C_;
    const float* xn2 = a.xn2 + l * Nmax * C_;
    const float* rstd2 = a.rstd2 + l * Nmax;
    const float* h13 = a.h13 + l * Nmax * 2 * F_;
    const float* g = a.g + l * Nmax * F_;

    // MLP branch; dres holds d(loss)/d(block output) and becomes d/d(x_mid).
    be_.matmul_backward(a.dg, gr + block_.w2, a.dres, g, p + block_.w2, N, F_, C_);
    be_.swiglu_backward(a.dh13, a.dg, h13, N, F_);
    be_.matmul_backward(a.dxn, gr + block_.w13, a.dh13, xn2, p + block_.w13, N, C_, 2 * F_);
    be_.rmsnorm_backward(a.dres, gr + block_.mlp_norm, a.dxn, x_mid, p + block_.mlp_norm, rstd2, N,
                         C_);

    // Attention branch; dres becomes d(loss)/d(block input).
    be_.matmul_backward(a.datt, gr + block_.wo, a.dres, att, p + block_.wo, N, H_ * D_, C_);
    be_.attention_backward(a.dqkv, a.datt, qkv, att, lse, B, T, H_, KV_, D_);
    be_.rope_backward(a.dqkv, a.rope_cos, a.rope_sin, N, T, H_ + KV_, D_, QKV_);
    be_.matmul_backward(a.dxn, gr + block_.wqkv, a.dqkv, xn1, p + block_.wqkv, N, C_, QKV_);
    be_.rmsnorm_backward(a.dres, gr + block_.attn_norm, a.dxn, x, p + block_.attn_norm, rstd1, N,
                         C_);
    units.release_params(unit, Pass::backward);
    units.release_grads(unit);
  }

  float* eg = units.acquire_grads(layout_.embed_unit());
  be_.embedding_backward(eg, a.dres, inputs, N, C_);
  units.release_grads(layout_.embed_unit());
  return mean_loss(N);
}

}  // namespace llm
