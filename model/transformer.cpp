// Forward and backward orchestration of the decoder over its units. All math
// is in the backend's kernels; this file only sequences them, asks the
// UnitProvider for parameters and gradient buffers at unit boundaries, and
// recomputes what activation checkpointing dropped.
// Invariant: a micro-batch queues its work from the upload of its tokens to
// the read-back of its losses without waiting for the device in between
// (parameter and gradient collectives aside, which the UnitProvider orders).
#include "model/transformer.h"

#include <algorithm>
#include <memory>

#include "runtime/error.h"
#include "model/backend.h"

namespace llm {

CheckpointingPlan checkpointing_plan(const TrainingConfig& t) {
  CheckpointingPlan plan;
  plan.every = t.checkpoint_every;
  plan.mode = t.activation_checkpointing;
  return plan;
}

namespace {

// One block's activations; for checkpointed blocks some point into the shared
// recompute scratch. T is the activation storage type; statistics are fp32.
template <class A> struct BlockBuffers {
  A* xn1;        // (N, C) attention-norm output
  float* rstd1;  // (N)
  A* qkv;        // (N, QKV) with RoPE applied to q and k
  A* att;        // (N, H * D) attention output before the projection
  float* lse;    // (B, H, T) softmax log-sum-exp per query
  A* x_mid;      // (N, C) residual stream after attention
  A* xn2;        // (N, C) MLP-norm output
  float* rstd2;  // (N)
  A* h13;        // (N, 2F) [gate | up]
  A* g;          // (N, F) silu(gate) * up
};
template <class A> struct HeadBuffers {
  A* residual;      // (L + 1, N, C): [l] is the input of block l, [L] the last output
  A* xf;            // (N, C) final-norm output
  float* rstd_f;    // (N)
  A* logits;        // (N, V); becomes dlogits in forward_backward
  float* losses;    // (N)
  int32_t* inputs;  // (N) the micro-batch's tokens, copied to the device
  int32_t* targets; // (N)
  float* rope_cos;  // (T, D / 2)
  float* rope_sin;  // (T, D / 2)
};
template <class A> struct GradBuffers {  // backward scratch, reused by every block
  A* dres;  // (N, C) gradient of the residual stream
  A* dxn;   // (N, C) gradient of a norm output
  A* dqkv;  // (N, QKV)
  A* datt;  // (N, H * D)
  A* dh13;  // (N, 2F)
  A* dg;    // (N, F)
};
template <class A> struct Buffers {
  std::vector<BlockBuffers<A>> blocks;
  BlockBuffers<A> scratch;
  HeadBuffers<A> head;
  GradBuffers<A> grads;
};

// Lists every buffer (binding `out`'s slots) and sums the bytes by role.
template <class A>
BufferPlan plan_activations(const ModelConfig& c, int B, int T, CheckpointingPlan checkpointing,
                            Buffers<A>& out, ActivationBytes& bytes) {
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
  auto plan_block = [&](BufferPlan& p, BlockBuffers<A>& b, bool expensive, bool cheap) {
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
    BlockBuffers<A> probe{};
    plan_block(kept, probe, true, true);
    plan_block(checkpointed, probe, selective, false);
    bytes.per_block_kept = kept.bytes();
    bytes.per_block_checkpointed = checkpointed.bytes();
  }
  out.blocks.assign(L, BlockBuffers<A>{});
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

  HeadBuffers<A>& h = out.head;
  plan.add(h.residual, (L + 1) * N * C);
  bytes.residual_stream = role_bytes();
  plan.add(h.xf, N * C);
  plan.add(h.rstd_f, N);
  plan.add(h.logits, N * c.vocab_size);
  plan.add(h.losses, N);
  plan.add(h.inputs, N);
  plan.add(h.targets, N);
  plan.add(h.rope_cos, T * D / 2);
  plan.add(h.rope_sin, T * D / 2);
  bytes.head_and_loss = role_bytes();
  GradBuffers<A>& g = out.grads;
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

}  // namespace

class Transformer::Impl {
 public:
  virtual ~Impl() = default;
  virtual float forward(UnitProvider& units, const int32_t* inputs, const int32_t* targets, int B,
                        int T) = 0;
  virtual float forward_backward(UnitProvider& units, const int32_t* inputs, const int32_t* targets,
                                 int B, int T, float dloss) = 0;
  virtual void logits_row(int row, float* out) const = 0;
  const ActivationBytes& bytes() const { return bytes_; }

 protected:
  ActivationBytes bytes_;
};

namespace {

template <class A> class TransformerImpl : public Transformer::Impl {
 public:
  TransformerImpl(const ModelConfig& config, const ParameterLayout& layout, int max_batch,
                  int max_seq, const Backend& backend, CheckpointingPlan checkpointing)
      : config_(config),
        layout_(layout),
        ops_(backend.ops<A>()),
        memory_(*backend.memory),
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
    arena_ = Arena("activations", plan.bytes(), memory_);
    host_losses_.resize(static_cast<size_t>(max_batch) * max_seq);
    host_row_.resize(V_);
    staging_ = {static_cast<int32_t*>(memory_.allocate_staging(
                    2 * static_cast<size_t>(max_batch) * max_seq * sizeof(int32_t))),
                memory_.release_staging};
    plan.bind(arena_);
    // Checkpointed blocks work in the shared scratch for what they do not keep.
    for (int l = 0; l < L_; ++l) {
      if (!checkpointing.checkpointed(l)) continue;
      BlockBuffers<A>& b = buf_.blocks[l];
      const BlockBuffers<A>& s = buf_.scratch;
      b.xn1 = s.xn1, b.rstd1 = s.rstd1, b.xn2 = s.xn2, b.rstd2 = s.rstd2, b.g = s.g;
      if (checkpointing.mode == Recompute::full) {
        b.qkv = s.qkv, b.att = s.att, b.lse = s.lse, b.x_mid = s.x_mid, b.h13 = s.h13;
      }
    }
    backend.rope_table(buf_.head.rope_cos, buf_.head.rope_sin, max_seq, D_,
                       static_cast<float>(config.rope_theta));
  }

  float forward(UnitProvider& units, const int32_t* inputs, const int32_t* targets, int B,
                int T) override;
  float forward_backward(UnitProvider& units, const int32_t* inputs, const int32_t* targets, int B,
                         int T, float dloss) override;
  void logits_row(int row, float* out) const override {
    memory_.to_host(host_row_.data(), buf_.head.logits + static_cast<size_t>(row) * V_,
                    V_ * sizeof(A));
    staging_in_flight_ = false;  // to_host waited for the device
    for (int v = 0; v < V_; ++v) out[v] = to_float(host_row_[v]);
  }

 private:
  // Offsets of a block's tensors within its unit (the same for every block).
  struct BlockOffsets {
    size_t attn_norm, wqkv, wo, mlp_norm, w13, w2;
  };

  const A* params(UnitProvider& units, int unit, Pass pass) {
    return static_cast<const A*>(units.acquire_params(unit, pass));
  }
  // Checks the micro-batch's shape and queues the copy of its tokens (and
  // targets, when not null) into the device's token buffers.
  void upload_micro_batch(const int32_t* inputs, const int32_t* targets, int B, int T);
  // The forward pass over the uploaded tokens, to the logits.
  void forward_blocks(UnitProvider& units, int B, int T);
  // Block l's forward into its buffers; with write_output false it stops
  // after SwiGLU (what backward recomputation needs).
  void block_forward(int l, const A* p, int B, int T, bool write_output);
  void recompute_block(int l, const A* p, int B, int T);
  void block_backward(int l, const A* p, float* grads, int B, int T);
  A* residual(int l) const {
    return buf_.head.residual + static_cast<size_t>(l) * max_batch_ * max_seq_ * C_;
  }
  const A* head_weight(UnitProvider& units, const A* head_params, Pass pass) {
    if (config_.tie_embeddings) return params(units, layout_.embed_unit(), pass);
    return head_params + config_.dim;
  }
  void release_head_weight(UnitProvider& units, Pass pass) {
    if (config_.tie_embeddings) units.release_params(layout_.embed_unit(), pass);
  }
  // Mean of the per-token losses, summed on the host in token order.
  float mean_loss(int N) {
    memory_.to_host(host_losses_.data(), buf_.head.losses, static_cast<size_t>(N) * sizeof(float));
    staging_in_flight_ = false;  // to_host waited for the device
    double sum = 0;
    for (int i = 0; i < N; ++i) sum += host_losses_[i];
    return static_cast<float>(sum / N);
  }

  const ModelConfig& config_;
  const ParameterLayout& layout_;
  const TypedOps<A>& ops_;  // the backend's table for storage type A
  const DeviceMemory& memory_;
  int max_batch_, max_seq_;
  int C_, H_, KV_, D_, F_, V_, L_, QKV_;
  CheckpointingPlan checkpointing_;
  BlockOffsets block_;
  Buffers<A> buf_;
  Arena arena_;
  std::vector<float> host_losses_;  // (max_batch * max_seq)
  mutable std::vector<A> host_row_;  // (V) one row of logits read back for sampling
  // Staging memory (device_memory.h) of the token uploads: inputs, then
  // targets, max_batch * max_seq each; queued without a wait, so a micro-batch
  // runs from its upload to its loss read-back without a host sync. Rewritten
  // only once the device has passed the last upload (a read-back since, or
  // else an explicit synchronize).
  std::unique_ptr<int32_t, void (*)(void*)> staging_{nullptr, nullptr};
  mutable bool staging_in_flight_ = false;
};

template <class A>
void TransformerImpl<A>::block_forward(int l, const A* p, int B, int T, bool write_output) {
  const int N = B * T;
  const float eps = static_cast<float>(config_.norm_eps);
  const BlockBuffers<A>& b = buf_.blocks[l];
  const A* x = residual(l);
  ops_.rmsnorm_forward(b.xn1, b.rstd1, x, p + block_.attn_norm, N, C_, eps);
  ops_.matmul_forward(b.qkv, b.xn1, p + block_.wqkv, N, C_, QKV_);
  ops_.rope_forward(b.qkv, buf_.head.rope_cos, buf_.head.rope_sin, N, T, H_ + KV_, D_, QKV_);
  ops_.attention_forward(b.att, b.lse, b.qkv, B, T, H_, KV_, D_);
  ops_.matmul_forward_residual(b.x_mid, b.att, p + block_.wo, x, N, H_ * D_, C_);

  ops_.rmsnorm_forward(b.xn2, b.rstd2, b.x_mid, p + block_.mlp_norm, N, C_, eps);
  ops_.matmul_forward(b.h13, b.xn2, p + block_.w13, N, C_, 2 * F_);
  ops_.swiglu_forward(b.g, b.h13, N, F_);
  if (!write_output) return;
  ops_.matmul_forward_residual(residual(l + 1), b.g, p + block_.w2, b.x_mid, N, F_, C_);
}

template <class A>
void TransformerImpl<A>::recompute_block(int l, const A* p, int B, int T) {
  if (!checkpointing_.checkpointed(l)) return;
  if (checkpointing_.mode == Recompute::full) {
    block_forward(l, p, B, T, /*write_output=*/false);
    return;
  }
  // Selective: the norms and SwiGLU, from the kept x_mid and h13.
  const int N = B * T;
  const float eps = static_cast<float>(config_.norm_eps);
  const BlockBuffers<A>& b = buf_.blocks[l];
  ops_.rmsnorm_forward(b.xn1, b.rstd1, residual(l), p + block_.attn_norm, N, C_, eps);
  ops_.rmsnorm_forward(b.xn2, b.rstd2, b.x_mid, p + block_.mlp_norm, N, C_, eps);
  ops_.swiglu_forward(b.g, b.h13, N, F_);
}

template <class A>
void TransformerImpl<A>::block_backward(int l, const A* p, float* gr, int B, int T) {
  const int N = B * T;
  const BlockBuffers<A>& b = buf_.blocks[l];
  const GradBuffers<A>& d = buf_.grads;
  // MLP branch; dres holds d(loss)/d(block output) and becomes d/d(x_mid).
  ops_.matmul_backward(d.dg, gr + block_.w2, d.dres, b.g, p + block_.w2, N, F_, C_);
  ops_.swiglu_backward(d.dh13, d.dg, b.h13, N, F_);
  ops_.matmul_backward(d.dxn, gr + block_.w13, d.dh13, b.xn2, p + block_.w13, N, C_, 2 * F_);
  ops_.rmsnorm_backward(d.dres, gr + block_.mlp_norm, d.dxn, b.x_mid, p + block_.mlp_norm, b.rstd2,
                       N, C_);
  // Attention branch; dres becomes d(loss)/d(block input).
  ops_.matmul_backward(d.datt, gr + block_.wo, d.dres, b.att, p + block_.wo, N, H_ * D_, C_);
  ops_.attention_backward(d.dqkv, d.datt, b.qkv, b.att, b.lse, B, T, H_, KV_, D_);
  ops_.rope_backward(d.dqkv, buf_.head.rope_cos, buf_.head.rope_sin, N, T, H_ + KV_, D_, QKV_);
  ops_.matmul_backward(d.dxn, gr + block_.wqkv, d.dqkv, b.xn1, p + block_.wqkv, N, C_, QKV_);
  ops_.rmsnorm_backward(d.dres, gr + block_.attn_norm, d.dxn, residual(l), p + block_.attn_norm,
                       b.rstd1, N, C_);
}

template <class A>
void TransformerImpl<A>::upload_micro_batch(const int32_t* inputs, const int32_t* targets, int B,
                                            int T) {
  LLM_CHECK(B >= 1 && B <= max_batch_ && T >= 1 && T <= max_seq_,
            "micro-batch ({}, {}) exceeds the activation buffers ({}, {})", B, T, max_batch_,
            max_seq_);
  if (staging_in_flight_) memory_.synchronize();
  const size_t N = static_cast<size_t>(B) * T, max_tokens = static_cast<size_t>(max_batch_) * max_seq_;
  int32_t* staged_inputs = staging_.get();
  int32_t* staged_targets = staged_inputs + max_tokens;
  std::copy_n(inputs, N, staged_inputs);
  memory_.to_device_async(buf_.head.inputs, staged_inputs, N * sizeof(int32_t));
  if (targets) {
    std::copy_n(targets, N, staged_targets);
    memory_.to_device_async(buf_.head.targets, staged_targets, N * sizeof(int32_t));
  }
  staging_in_flight_ = true;
}

template <class A>
void TransformerImpl<A>::forward_blocks(UnitProvider& units, int B, int T) {
  const int N = B * T;
  const HeadBuffers<A>& h = buf_.head;
  const A* embed = params(units, layout_.embed_unit(), Pass::forward);
  ops_.embedding_forward(residual(0), h.inputs, embed, N, C_);
  units.release_params(layout_.embed_unit(), Pass::forward);

  for (int l = 0; l < L_; ++l) {
    const A* p = params(units, layout_.block_unit(l), Pass::forward);
    block_forward(l, p, B, T, /*write_output=*/true);
    units.release_params(layout_.block_unit(l), Pass::forward);
  }

  const int head = layout_.head_unit();
  const A* hp = params(units, head, Pass::forward);
  ops_.rmsnorm_forward(h.xf, h.rstd_f, residual(L_), hp, N, C_, static_cast<float>(config_.norm_eps));
  ops_.matmul_forward(h.logits, h.xf, head_weight(units, hp, Pass::forward), N, C_, V_);
  release_head_weight(units, Pass::forward);
  units.release_params(head, Pass::forward);
}


template <class A>
float TransformerImpl<A>::forward(UnitProvider& units, const int32_t* inputs, const int32_t* targets,
                                 int B, int T) {
  upload_micro_batch(inputs, targets, B, T);
  forward_blocks(units, B, T);
  if (!targets) return 0.0f;
  const int N = B * T;
  ops_.cross_entropy_forward(buf_.head.losses, buf_.head.logits, buf_.head.targets, N, V_);
  return mean_loss(N);
}

template <class A>
float TransformerImpl<A>::forward_backward(UnitProvider& units, const int32_t* inputs,
                                          const int32_t* targets, int B, int T, float dloss) {
  upload_micro_batch(inputs, targets, B, T);
  forward_blocks(units, B, T);
  const int N = B * T;
  const HeadBuffers<A>& h = buf_.head;
  const GradBuffers<A>& d = buf_.grads;
  ops_.cross_entropy_forward_backward(h.losses, h.logits, h.targets, N, V_, dloss);

  // Head: final norm and LM head (its weight may be the tied embedding).
  const int head = layout_.head_unit();
  const A* hp = params(units, head, Pass::backward);
  float* hg = units.acquire_grads(head);
  float* head_weight_grad =
      config_.tie_embeddings ? units.acquire_grads(layout_.embed_unit()) : hg + C_;
  ops_.matmul_backward(d.dxn, head_weight_grad, h.logits, h.xf,
                      head_weight(units, hp, Pass::backward), N, C_, V_);
  ops_.fill_zero(d.dres, static_cast<size_t>(N) * C_);
  ops_.rmsnorm_backward(d.dres, hg, d.dxn, residual(L_), hp, h.rstd_f, N, C_);
  release_head_weight(units, Pass::backward);
  units.release_params(head, Pass::backward);
  units.release_grads(head);

  for (int l = L_ - 1; l >= 0; --l) {
    const int unit = layout_.block_unit(l);
    const A* p = params(units, unit, Pass::backward);
    float* gr = units.acquire_grads(unit);
    recompute_block(l, p, B, T);
    block_backward(l, p, gr, B, T);
    units.release_params(unit, Pass::backward);
    units.release_grads(unit);
  }

  float* eg = units.acquire_grads(layout_.embed_unit());
  ops_.embedding_backward(eg, d.dres, h.inputs, N, C_);  // uploaded by upload_micro_batch
  units.release_grads(layout_.embed_unit());
  return mean_loss(N);
}


}  // namespace

Transformer::Transformer(const ModelConfig& config, int max_batch, int max_seq,
                         const Backend& backend, CheckpointingPlan checkpointing,
                         Precision precision)
    : config_(config), layout_(layout_build(config)), precision_(precision) {
  if (precision == Precision::bf16) {
    impl_ = std::make_unique<TransformerImpl<Bf16>>(config_, layout_, max_batch, max_seq, backend,
                                                    checkpointing);
  } else {
    impl_ = std::make_unique<TransformerImpl<float>>(config_, layout_, max_batch, max_seq, backend,
                                                     checkpointing);
  }
}

Transformer::~Transformer() = default;

ActivationBytes Transformer::activation_bytes(const ModelConfig& config, int B, int T,
                                              CheckpointingPlan checkpointing, Precision precision) {
  ActivationBytes bytes;
  if (precision == Precision::bf16) {
    Buffers<Bf16> unbound;
    plan_activations(config, B, T, checkpointing, unbound, bytes);
  } else {
    Buffers<float> unbound;
    plan_activations(config, B, T, checkpointing, unbound, bytes);
  }
  return bytes;
}

const ActivationBytes& Transformer::activation_bytes() const { return impl_->bytes(); }

float Transformer::forward(UnitProvider& units, const int32_t* inputs, const int32_t* targets,
                           int B, int T) {
  return impl_->forward(units, inputs, targets, B, T);
}

void Transformer::logits_row(int row, float* out) const { impl_->logits_row(row, out); }

float Transformer::forward_backward(UnitProvider& units, const int32_t* inputs,
                                    const int32_t* targets, int B, int T, float dloss) {
  return impl_->forward_backward(units, inputs, targets, B, T, dloss);
}

}  // namespace llm
