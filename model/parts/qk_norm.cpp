// QK-norm (Qwen3, OLMo-2; model.qk_norm): an RMSNorm of each query and key
// head after the projection, before RoPE, with one gain per head kind held
// whole by every rank; each rank's heads give part of the gains' gradients,
// summed over the tensor group with the block's other gains. It applies RoPE
// to the q and k heads in the same pass (forward; backward turns their
// gradient back first) and says so in the flow (BlockFlow::qk_rotated), so
// the attention part skips its own RoPE passes. A model with it is Hugging
// Face's qwen3. Kernels: model/kernels/qk_norm.*.
#include "model/block_part.h"
#include "model/tensor_parallel_sites.h"

namespace llm {
namespace {

template <class A>
class QkNorm final : public BlockPart<A> {
 public:
  explicit QkNorm(int row) : q_row_(row), k_row_(row + 1) {}
  void plan(BlockActivations& activations, const RankShape& s) override {
    activations.add(normed_, s.N * s.QKV, Keep::expensive);
    activations.add(rstd_, s.N * (s.H + s.KV), Keep::expensive);
    activations.add_backward(dprojected_, s.N * s.QKV);
  }
  void pass(const BlockContext<A>& ctx, BlockFlow<A>& flow) const override {
    flow.set_hidden(normed_.get(ctx.slot, ctx.block), nullptr, /*rotated=*/true);
  }
  void forward(const BlockContext<A>& ctx, const BlockFlow<A>& in) override {
    const RankShape& s = ctx.shape;
    ctx.ops.qk_norm_forward(normed_.get(ctx.slot, ctx.block), rstd_.get(ctx.slot, ctx.block),
                            in.hidden, ctx.param(q_row_), ctx.param(k_row_), ctx.N(),
                            static_cast<int>(s.H), static_cast<int>(s.KV), static_cast<int>(s.D),
                            static_cast<float>(ctx.config.norm_eps), ctx.rope_angles());
  }
  const A* backward(const BlockContext<A>& ctx, const BlockFlow<A>& in, const A* dout) override {
    const RankShape& s = ctx.shape;
    ctx.ops.qk_norm_backward(dprojected_, ctx.sites.gain_grad(ctx.grads, q_row_),
                             ctx.sites.gain_grad(ctx.grads, k_row_), dout, in.hidden,
                             ctx.param(q_row_), ctx.param(k_row_), rstd_.get(ctx.slot, ctx.block),
                             ctx.N(), static_cast<int>(s.H), static_cast<int>(s.KV),
                             static_cast<int>(s.D), ctx.rope_angles());
    return dprojected_;
  }

 private:
  int q_row_, k_row_;
  PerBlock<A> normed_;       // (N, QKV) q and k heads normed and rotated, v as projected
  PerBlock<float> rstd_;     // (N, H + KV) each head's statistics
  A* dprojected_ = nullptr;  // (N, QKV) the gradient of the projection
};

std::vector<BlockTensorSpec> qk_norm_tensors(const ModelConfig& c) {
  const int64_t D = c.resolved_head_dim();
  return {{.name = "attn.q_norm.weight",
           .parts = {{"self_attn.q_norm.weight", D}},
           .init = TensorInit::ones},
          {.name = "attn.k_norm.weight",
           .parts = {{"self_attn.k_norm.weight", D}},
           .init = TensorInit::ones}};
}

}  // namespace

extern const BlockPartDeclaration kQkNorm = {"qk_norm",
                                             "QK-norm",
                                             &ModelConfig::qk_norm,
                                             {"qwen3", "Qwen3ForCausalLM", 128},
                                             qk_norm_tensors,
                                             make_part<QkNorm, float>,
                                             make_part<QkNorm, Bf16>};

}  // namespace llm
