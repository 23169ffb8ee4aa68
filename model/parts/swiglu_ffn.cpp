// The SwiGLU feed-forward network: the fused gate and up projection
// (column-parallel), silu(gate) * up, and the down projection (row-parallel)
// added to the residual stream into the block's output. Under precision fp8
// SwiGLU writes its rows' amaxes for w2's matmul (under delayed scaling that
// matmul's codes too), and its backward those of dh13 for w13's (any
// tensor-parallel size: each rank's matmul quantizes its own columns of g
// and dh13).
#include "model/block_part.h"
#include "model/tensor_parallel_sites.h"

namespace llm {
namespace {

template <class A>
class SwigluFfn final : public BlockPart<A> {
 public:
  explicit SwigluFfn(int row) : w13_row_(row), w2_row_(row + 1) {}
  void plan(BlockActivations& activations, const RankShape& s) override {
    activations.add(h13_, s.N * 2 * s.F, Keep::expensive);
    activations.add(g_, s.N * s.F, Keep::cheap);
    activations.add_backward(dh13_, s.N * 2 * s.F);
    activations.add_backward(dg_, s.N * s.F);
  }
  void pass(const BlockContext<A>&, BlockFlow<A>& flow) const override {
    flow.stream = flow.output;
    flow.set_hidden(nullptr);
  }
  void forward(const BlockContext<A>& ctx, const BlockFlow<A>& in) override {
    const int N = ctx.N(), C = static_cast<int>(ctx.shape.C), F = static_cast<int>(ctx.shape.F);
    A* h13 = h13_.get(ctx.slot, ctx.block);
    A* g = g_.get(ctx.slot, ctx.block);
    ctx.linear.forward(h13, in.hidden, weight(ctx, w13_row_), nullptr, N, C, 2 * F,
                       in.hidden_row_amax);
    // After w13's matmul has read the norm's row amaxes (and codes) from the same place.
    const Fp8InputCast cast = ctx.linear.input_cast(ctx.block, w13_row_);
    if (cast.codes)
      ctx.ops.swiglu_forward_fp8(g, h13, N, F, cast.row_amax, cast.codes, cast.scale);
    else
      ctx.ops.swiglu_forward(g, h13, N, F, cast.row_amax);
    if (!in.output) return;
    ctx.sites.row_parallel_forward(in.output, g, weight(ctx, w2_row_), in.stream, N, F,
                                   cast.row_amax);
  }
  // Selective recomputation: w2's matmul is not run again.
  void recompute(const BlockContext<A>& ctx, const BlockFlow<A>&) override {
    ctx.ops.swiglu_forward(g_.get(ctx.slot, ctx.block), h13_.get(ctx.slot, ctx.block), ctx.N(),
                           static_cast<int>(ctx.shape.F), nullptr);
  }
  // From the residual stream's gradient (dres) to the normed input's.
  const A* backward(const BlockContext<A>& ctx, const BlockFlow<A>& in, const A*) override {
    const int N = ctx.N(), C = static_cast<int>(ctx.shape.C), F = static_cast<int>(ctx.shape.F);
    const A* dres_full = ctx.sites.gather_dres(N);
    ctx.linear.backward(dg_, ctx.grad(w2_row_), dres_full, g_.get(ctx.slot, ctx.block),
                        weight(ctx, w2_row_), N, F, C, ctx.sites.dres_row_amax());
    float* dh13_row_amax = ctx.linear.hidden_grad_row_amax();
    ctx.ops.swiglu_backward(dh13_, dg_, h13_.get(ctx.slot, ctx.block), N, F, dh13_row_amax);
    return ctx.sites.column_parallel_backward(ctx.grad(w13_row_), dh13_, in.hidden,
                                              weight(ctx, w13_row_), N, 2 * F, dh13_row_amax);
  }

 private:
  typename LinearLayers<A>::Weight weight(const BlockContext<A>& ctx, int row) const {
    return ctx.linear.block_weight(ctx.slot, ctx.block, ctx.params, row);
  }
  int w13_row_, w2_row_;
  PerBlock<A> h13_;    // (N, 2F) [gate | up]
  PerBlock<A> g_;      // (N, F) silu(gate) * up
  A* dh13_ = nullptr;  // (N, 2F)
  A* dg_ = nullptr;    // (N, F)
};

std::vector<BlockTensorSpec> swiglu_ffn_tensors(const ModelConfig& c) {
  return {{"mlp.w13",
           {{"mlp.gate_proj.weight", c.ffn_dim}, {"mlp.up_proj.weight", c.ffn_dim}},
           c.dim,
           TensorParallelSplit::rows},
          {"mlp.w2",
           {{"mlp.down_proj.weight", c.dim}},
           c.ffn_dim,
           TensorParallelSplit::columns,
           /*output_projection=*/true,
           /*recomputed=*/false}};
}

}  // namespace

extern const BlockPartDeclaration kSwigluFfn = {"swiglu_ffn",
                                                "the SwiGLU FFN",
                                                nullptr,
                                                {},
                                                swiglu_ffn_tensors,
                                                make_part<SwigluFfn, float>,
                                                make_part<SwigluFfn, Bf16>};

}  // namespace llm
