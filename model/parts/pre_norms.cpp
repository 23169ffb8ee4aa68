// The block's two RMSNorms, each before its branch (attention, MLP): the
// norm of this rank's rows of the residual stream, all rows all-gathered
// (tensor_parallel_sites.h), with a gain held whole by every rank; under
// precision fp8 with tp = 1 it writes each row's amax beside it, for the
// matmul the next part runs on it (the qkv projection, the FFN's w13), and
// under delayed scaling that matmul's codes too; its backward writes each
// row's amax of the residual stream's gradient, for the row-parallel
// projection before it (the previous block's w2, attention's wo).
#include "model/block_part.h"
#include "model/tensor_parallel_sites.h"

namespace llm {
namespace {

template <class A>
class PreNorm final : public BlockPart<A> {
 public:
  explicit PreNorm(int row) : row_(row) {}
  void plan(BlockActivations& activations, const RankShape& s) override {
    activations.add(normed_, s.N * s.C, Keep::cheap);
    activations.add(rstd_, s.n, Keep::cheap);
  }
  void pass(const BlockContext<A>& ctx, BlockFlow<A>& flow) const override {
    flow.set_hidden(normed_.get(ctx.slot, ctx.block), cast(ctx).row_amax);
  }
  void forward(const BlockContext<A>& ctx, const BlockFlow<A>& in) override {
    norm(ctx, in, cast(ctx));
  }
  // Selective recomputation: the matmul after it is not run again.
  void recompute(const BlockContext<A>& ctx, const BlockFlow<A>& in) override { norm(ctx, in, {}); }
  const A* backward(const BlockContext<A>& ctx, const BlockFlow<A>& in, const A* dout) override {
    ctx.sites.norm_backward(ctx.sites.gain_grad(ctx.grads, row_), dout, in.stream, ctx.param(row_),
                            rstd_.get(ctx.slot, ctx.block), ctx.N());
    return nullptr;
  }

 private:
  Fp8InputCast cast(const BlockContext<A>& ctx) const {
    return ctx.sites.norm_cast(ctx.block, row_);
  }
  void norm(const BlockContext<A>& ctx, const BlockFlow<A>& in, Fp8InputCast cast) const {
    ctx.sites.norm_gathered(normed_.get(ctx.slot, ctx.block), rstd_.get(ctx.slot, ctx.block),
                            in.stream, ctx.param(row_), ctx.N(), cast);
  }

  int row_;
  PerBlock<A> normed_;    // (N, C)
  PerBlock<float> rstd_;  // (n)
};

std::vector<BlockTensorSpec> attention_norm_tensors(const ModelConfig& c) {
  return {{.name = "attn_norm.weight",
           .parts = {{"input_layernorm.weight", c.dim}},
           .init = TensorInit::ones}};
}
std::vector<BlockTensorSpec> mlp_norm_tensors(const ModelConfig& c) {
  return {{.name = "mlp_norm.weight",
           .parts = {{"post_attention_layernorm.weight", c.dim}},
           .init = TensorInit::ones}};
}

}  // namespace

extern const BlockPartDeclaration kAttentionNorm = {
    "attention_norm",          "the attention's norm",  nullptr, {}, attention_norm_tensors,
    make_part<PreNorm, float>, make_part<PreNorm, Bf16>};
extern const BlockPartDeclaration kMlpNorm = {"mlp_norm",
                                              "the MLP's norm",
                                              nullptr,
                                              {},
                                              mlp_norm_tensors,
                                              make_part<PreNorm, float>,
                                              make_part<PreNorm, Bf16>};

}  // namespace llm
