// Forward and backward orchestration of the decoder over its units. All math
// is in the backend's kernels; this file only sequences them, asks the
// UnitProvider for parameters and gradient buffers at unit boundaries, and
// recomputes what activation checkpointing dropped.
#include "model/transformer.h"

#include "core/error.h"

namespace llm {

CheckpointingPlan checkpointing_plan(const TrainingConfig& t) {
  CheckpointingPlan plan;
  plan.every = t.checkpoint_every;
  if (t.activation_checkpointing == "full") plan.mode = Recompute::full;
  if (t.activation_checkpointing == "selective") plan.mode = Recompute::selective;
  return plan;
}

Transformer::Transformer(const ModelConfig& config, int max_batch, int max_seq,
                         const Backend& backend, CheckpointingPlan checkpointing)
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
      QKV_((config.n_heads + 2 * config.n_kv_heads) * (config.dim / config.n_heads)),
      checkpointing_(checkpointing) {
  const UnitSpec& block = layout_.units[layout_.block_unit(0)];
  auto offset = [&](int i) { return layout_.tensors[block.tensors[i]].offset; };
  block_ = {offset(0), offset(1), offset(2), offset(3), offset(4), offset(5)};

  BufferPlan plan = plan_activations(config, max_batch, max_seq, checkpointing, buf_, bytes_);
  arena_ = Arena("activations", plan.bytes());
  plan.bind(arena_);
  // Checkpointed blocks work in the shared scratch for what they do not keep.
  for (int l = 0; l < L_; ++l) {
    if (!checkpointing.checkpointed(l)) continue;
    BlockBuffers& b = buf_.blocks[l];
    const BlockBuffers& s = buf_.scratch;
    b.xn1 = s.xn1, b.rstd1 = s.rstd1, b.xn2 = s.xn2, b.rstd2 = s.rstd2, b.g = s.g;
    if (checkpointing.mode == Recompute::full) {
      b.qkv = s.qkv, b.att = s.att, b.lse = s.lse, b.x_mid = s.x_mid, b.h13 = s.h13;
    }
  }
  be_.rope_table(buf_.head.rope_cos, buf_.head.rope_sin, max_seq, D_,
                 static_cast<float>(config.rope_theta));
}

BufferPlan Transformer::plan_activations(const ModelConfig& c, int B, int T,
                                         CheckpointingPlan checkpointing, Buffers& out,
                                         ActivationBytes& bytes) {
  const size_t N = static_cast<size_t>(B) * T, L = c.n_layers, C = c.dim, F = c.ffn_dim;
  const size_t D = c.dim / c.n_heads, HD = c.n_heads * D, QKV = (c.n_heads + 2 * c.n_kv_heads) * D;
  BufferPlan plan;
  size_t before = 0;
  auto role_bytes = [&]() {
    size_t now = plan.bytes(), added = now - before;
    before = now;
    return added;
  };
  // What a block keeps: the matmul / attention outputs ("expensive", kept
  // unless the block is fully checkpointed) and the norm / SwiGLU outputs
  // ("cheap", kept only by blocks that are not checkpointed).
  auto plan_block = [&](BufferPlan& p, BlockBuffers& b, bool expensive, bool cheap) {
    if (expensive) {
      p.add(b.qkv, N * QKV);
      p.add(b.att, N * HD);
      p.add(b.lse, N * c.n_heads);
      p.add(b.x_mid, N * C);
      p.add(b.h13, N * 2 * F);
    }
    if (cheap) {
      p.add(b.xn1, N * C);
      p.add(b.rstd1, N);
      p.add(b.xn2, N * C);
      p.add(b.rstd2, N);
      p.add(b.g, N * F);
    }
  };
  const bool selective = checkpointing.mode == Recompute::selective;
  {
    BufferPlan kept, checkpointed;
    BlockBuffers probe{};
    plan_block(kept, probe, true, true);
    plan_block(checkpointed, probe, selective, false);
    bytes.per_block_kept = kept.bytes();
    bytes.per_block_checkpointed = checkpointed.bytes();
  }
  out.blocks.assign(L, BlockBuffers{});
  bool any_checkpointed = false;
  for (size_t l = 0; l < L; ++l) {
    bool checkpointed = checkpointing.checkpointed(static_cast<int>(l));
    any_checkpointed = any_checkpointed || checkpointed;
    plan_block(plan, out.blocks[l], !checkpointed || selective, !checkpointed);
  }
  role_bytes();
  if (any_checkpointed) {  // selective blocks keep their expensive outputs themselves
    plan_block(plan, out.scratch, !selective, true);
    bytes.recompute_scratch = role_bytes();
  }

  HeadBuffers& h = out.head;
  plan.add(h.residual, (L + 1) * N * C);
  bytes.residual_stream = role_bytes();
  plan.add(h.xf, N * C);
  plan.add(h.rstd_f, N);
  plan.add(h.logits, N * c.vocab_size);
  plan.add(h.losses, N);
  plan.add(h.rope_cos, T * D / 2);
  plan.add(h.rope_sin, T * D / 2);
  bytes.head_and_loss = role_bytes();
  GradBuffers& g = out.grads;
  plan.add(g.dres, N * C);
  plan.add(g.dxn, N * C);
  plan.add(g.dqkv, N * QKV);
  plan.add(g.datt, N * HD);
  plan.add(g.dh13, N * 2 * F);
  plan.add(g.dg, N * F);
  bytes.backward_scratch = role_bytes();
  bytes.total = plan.bytes();
  return plan;
}

ActivationBytes Transformer::activation_bytes(const ModelConfig& config, int B, int T,
                                              CheckpointingPlan checkpointing) {
  Buffers unbound;
  ActivationBytes bytes;
  plan_activations(config, B, T, checkpointing, unbound, bytes);
  return bytes;
}

float* Transformer::residual(int l) const {
  return buf_.head.residual + static_cast<size_t>(l) * max_batch_ * max_seq_ * C_;
}

const float* Transformer::head_weight(UnitProvider& units, const float* head_params, Pass pass) {
  if (config_.tie_embeddings) return units.acquire_params(layout_.embed_unit(), pass);
  return head_params + config_.dim;
}

void Transformer::release_head_weight(UnitProvider& units, Pass pass) {
  if (config_.tie_embeddings) units.release_params(layout_.embed_unit(), pass);
}

void Transformer::block_forward(int l, const float* p, int B, int T, bool write_output) {
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C_;
  const float eps = static_cast<float>(config_.norm_eps);
  const BlockBuffers& b = buf_.blocks[l];
  const float* x = residual(l);
  be_.rmsnorm_forward(b.xn1, b.rstd1, x, p + block_.attn_norm, N, C_, eps);
  be_.matmul_forward(b.qkv, b.xn1, p + block_.wqkv, N, C_, QKV_);
  be_.rope_forward(b.qkv, buf_.head.rope_cos, buf_.head.rope_sin, N, T, H_ + KV_, D_, QKV_);
  be_.attention_forward(b.att, b.lse, b.qkv, B, T, H_, KV_, D_);
  be_.matmul_forward(b.x_mid, b.att, p + block_.wo, N, H_ * D_, C_);
  be_.residual_forward(b.x_mid, b.x_mid, x, NC);

  be_.rmsnorm_forward(b.xn2, b.rstd2, b.x_mid, p + block_.mlp_norm, N, C_, eps);
  be_.matmul_forward(b.h13, b.xn2, p + block_.w13, N, C_, 2 * F_);
  be_.swiglu_forward(b.g, b.h13, N, F_);
  if (!write_output) return;
  float* x_out = residual(l + 1);
  be_.matmul_forward(x_out, b.g, p + block_.w2, N, F_, C_);
  be_.residual_forward(x_out, x_out, b.x_mid, NC);
}

void Transformer::recompute_block(int l, const float* p, int B, int T) {
  if (!checkpointing_.checkpointed(l)) return;
  if (checkpointing_.mode == Recompute::full) {
    block_forward(l, p, B, T, /*write_output=*/false);
    return;
  }
  // Selective: the norms and SwiGLU, from the kept x_mid and h13.
  const int N = B * T;
  const float eps = static_cast<float>(config_.norm_eps);
  const BlockBuffers& b = buf_.blocks[l];
  be_.rmsnorm_forward(b.xn1, b.rstd1, residual(l), p + block_.attn_norm, N, C_, eps);
  be_.rmsnorm_forward(b.xn2, b.rstd2, b.x_mid, p + block_.mlp_norm, N, C_, eps);
  be_.swiglu_forward(b.g, b.h13, N, F_);
}

void Transformer::block_backward(int l, const float* p, float* gr, int B, int T) {
  const int N = B * T;
  const BlockBuffers& b = buf_.blocks[l];
  const GradBuffers& d = buf_.grads;
  // MLP branch; dres holds d(loss)/d(block output) and becomes d/d(x_mid).
  be_.matmul_backward(d.dg, gr + block_.w2, d.dres, b.g, p + block_.w2, N, F_, C_);
  be_.swiglu_backward(d.dh13, d.dg, b.h13, N, F_);
  be_.matmul_backward(d.dxn, gr + block_.w13, d.dh13, b.xn2, p + block_.w13, N, C_, 2 * F_);
  be_.rmsnorm_backward(d.dres, gr + block_.mlp_norm, d.dxn, b.x_mid, p + block_.mlp_norm, b.rstd2,
                       N, C_);
  // Attention branch; dres becomes d(loss)/d(block input).
  be_.matmul_backward(d.datt, gr + block_.wo, d.dres, b.att, p + block_.wo, N, H_ * D_, C_);
  be_.attention_backward(d.dqkv, d.datt, b.qkv, b.att, b.lse, B, T, H_, KV_, D_);
  be_.rope_backward(d.dqkv, buf_.head.rope_cos, buf_.head.rope_sin, N, T, H_ + KV_, D_, QKV_);
  be_.matmul_backward(d.dxn, gr + block_.wqkv, d.dqkv, b.xn1, p + block_.wqkv, N, C_, QKV_);
  be_.rmsnorm_backward(d.dres, gr + block_.attn_norm, d.dxn, residual(l), p + block_.attn_norm,
                       b.rstd1, N, C_);
}

void Transformer::forward_blocks(UnitProvider& units, const int32_t* inputs, int B, int T) {
  LLM_CHECK(B >= 1 && B <= max_batch_ && T >= 1 && T <= max_seq_,
            "micro-batch ({}, {}) exceeds the activation buffers ({}, {})", B, T, max_batch_,
            max_seq_);
  const int N = B * T;
  const HeadBuffers& h = buf_.head;
  const float* embed = units.acquire_params(layout_.embed_unit(), Pass::forward);
  be_.embedding_forward(residual(0), inputs, embed, N, C_);
  units.release_params(layout_.embed_unit(), Pass::forward);

  for (int l = 0; l < L_; ++l) {
    const float* p = units.acquire_params(layout_.block_unit(l), Pass::forward);
    block_forward(l, p, B, T, /*write_output=*/true);
    units.release_params(layout_.block_unit(l), Pass::forward);
  }

  const int head = layout_.head_unit();
  const float* hp = units.acquire_params(head, Pass::forward);
  be_.rmsnorm_forward(h.xf, h.rstd_f, residual(L_), hp, N, C_, static_cast<float>(config_.norm_eps));
  be_.matmul_forward(h.logits, h.xf, head_weight(units, hp, Pass::forward), N, C_, V_);
  release_head_weight(units, Pass::forward);
  units.release_params(head, Pass::forward);
}

float Transformer::mean_loss(int N) const {
  double sum = 0;
  for (int i = 0; i < N; ++i) sum += buf_.head.losses[i];
  return static_cast<float>(sum / N);
}

float Transformer::forward(UnitProvider& units, const int32_t* inputs, const int32_t* targets,
                           int B, int T) {
  forward_blocks(units, inputs, B, T);
  if (!targets) return 0.0f;
  be_.cross_entropy_forward(buf_.head.losses, buf_.head.logits, targets, B * T, V_);
  return mean_loss(B * T);
}

float Transformer::forward_backward(UnitProvider& units, const int32_t* inputs,
                                    const int32_t* targets, int B, int T, float dloss) {
  forward_blocks(units, inputs, B, T);
  const int N = B * T;
  const HeadBuffers& h = buf_.head;
  const GradBuffers& d = buf_.grads;
  be_.cross_entropy_forward_backward(h.losses, h.logits, targets, N, V_, dloss);

  // Head: final norm and LM head (its weight may be the tied embedding).
  const int head = layout_.head_unit();
  const float* hp = units.acquire_params(head, Pass::backward);
  float* hg = units.acquire_grads(head);
  float* head_weight_grad =
      config_.tie_embeddings ? units.acquire_grads(layout_.embed_unit()) : hg + C_;
  be_.matmul_backward(d.dxn, head_weight_grad, h.logits, h.xf,
                      head_weight(units, hp, Pass::backward), N, C_, V_);
  be_.fill_zero(d.dres, static_cast<size_t>(N) * C_);
  be_.rmsnorm_backward(d.dres, hg, d.dxn, residual(L_), hp, h.rstd_f, N, C_);
  release_head_weight(units, Pass::backward);
  units.release_params(head, Pass::backward);
  units.release_grads(head);

  for (int l = L_ - 1; l >= 0; --l) {
    const int unit = layout_.block_unit(l);
    const float* p = units.acquire_params(unit, Pass::backward);
    float* gr = units.acquire_grads(unit);
    recompute_block(l, p, B, T);
    block_backward(l, p, gr, B, T);
    units.release_params(unit, Pass::backward);
    units.release_grads(unit);
  }

  float* eg = units.acquire_grads(layout_.embed_unit());
  be_.embedding_backward(eg, d.dres, inputs, N, C_);
  units.release_grads(layout_.embed_unit());
  return mean_loss(N);
}

}  // namespace llm
