// The attention's query, key and value projection: one fused column-parallel
// matmul of the normed rows, each rank computing its heads.
#include "model/block_part.h"
#include "model/tensor_parallel_sites.h"

namespace llm {
namespace {

template <class A>
class QkvProjection final : public BlockPart<A> {
 public:
  explicit QkvProjection(int row) : row_(row) {}
  void plan(BlockActivations& activations, const RankShape& s) override {
    activations.add(qkv_, s.N * s.QKV, Keep::expensive);
  }
  void pass(const BlockContext<A>& ctx, BlockFlow<A>& flow) const override {
    flow.set_hidden(qkv_.get(ctx.slot, ctx.block));
  }
  void forward(const BlockContext<A>& ctx, const BlockFlow<A>& in) override {
    const RankShape& s = ctx.shape;
    ctx.linear.forward(qkv_.get(ctx.slot, ctx.block), in.hidden, weight(ctx), nullptr, ctx.N(),
                       static_cast<int>(s.C), static_cast<int>(s.QKV), in.hidden_row_amax);
  }
  const A* backward(const BlockContext<A>& ctx, const BlockFlow<A>& in, const A* dout) override {
    return ctx.sites.column_parallel_backward(ctx.grad(row_), dout, in.hidden, weight(ctx), ctx.N(),
                                              static_cast<int>(ctx.shape.QKV));
  }

 private:
  typename LinearLayers<A>::Weight weight(const BlockContext<A>& ctx) const {
    return ctx.linear.block_weight(ctx.slot, ctx.block, ctx.params, row_);
  }
  int row_;
  PerBlock<A> qkv_;  // (N, (H + 2 KV) D): this rank's q heads, then its k and v heads
};

std::vector<BlockTensorSpec> qkv_projection_tensors(const ModelConfig& c) {
  const int64_t D = c.resolved_head_dim(), q_rows = c.n_heads * D, kv_rows = c.n_kv_heads * D;
  return {{"attn.wqkv",
           {{"self_attn.q_proj.weight", q_rows},
            {"self_attn.k_proj.weight", kv_rows},
            {"self_attn.v_proj.weight", kv_rows}},
           c.dim,
           TensorParallelSplit::rows}};
}

}  // namespace

extern const BlockPartDeclaration kQkvProjection = {"qkv_projection",
                                                    "the qkv projection",
                                                    nullptr,
                                                    {},
                                                    qkv_projection_tensors,
                                                    make_part<QkvProjection, float>,
                                                    make_part<QkvProjection, Bf16>};

}  // namespace llm
