// Causal grouped-query attention on this rank's heads: RoPE on the queries
// and keys (in place, unless the part before rotated them as it wrote them:
// BlockFlow::qk_rotated), the attention (document-masked when the slot's
// tokens say so; from the key/value cache when decoding), and the output
// projection, row-parallel, added to the residual stream.
#include "model/block_part.h"
#include "model/tensor_parallel_sites.h"

namespace llm {
namespace {

template <class A>
class Attention final : public BlockPart<A> {
 public:
  explicit Attention(int row) : row_(row) {}
  void plan(BlockActivations& activations, const RankShape& s) override {
    activations.add(att_, s.N * s.HD, Keep::expensive);
    activations.add(lse_, s.N * s.H, Keep::expensive);
    activations.add(x_mid_, s.n * s.C, Keep::expensive);
    activations.add_backward(dqkv_, s.N * s.QKV);
    activations.add_backward(datt_, s.N * s.HD);
  }
  void pass(const BlockContext<A>& ctx, BlockFlow<A>& flow) const override {
    flow.stream = x_mid_.get(ctx.slot, ctx.block);
    flow.set_hidden(nullptr);
  }
  void forward(const BlockContext<A>& ctx, const BlockFlow<A>& in) override {
    const RankShape& s = ctx.shape;
    const int B = ctx.B, T = ctx.T, N = ctx.N(), H = static_cast<int>(s.H);
    const int KV = static_cast<int>(s.KV), D = static_cast<int>(s.D);
    A* qkv = in.hidden;
    A* att = att_.get(ctx.slot, ctx.block);
    if (!in.qk_rotated) {
      const RopeAngles rope = ctx.rope_angles();
      ctx.ops.rope_forward(qkv, rope.cos, rope.sin, rope.positions, N, T, H + KV, D,
                           static_cast<int>(s.QKV));
    }
    if (ctx.decode_start >= 0) {  // one sequence: no document mask
      ctx.ops.kv_cache_write(ctx.kv_cache, qkv, B, T, ctx.decode_start, H, KV, D, ctx.kv_capacity);
      ctx.ops.attention_cached(att, qkv, ctx.kv_cache, B, T, ctx.decode_start, H, KV, D,
                               ctx.kv_capacity);
    } else {
      ctx.ops.attention_forward(att, lse_.get(ctx.slot, ctx.block), qkv, ctx.doc_start, B, T, H, KV,
                                D);
    }
    ctx.sites.row_parallel_forward(x_mid_.get(ctx.slot, ctx.block), att, weight(ctx), in.stream, N,
                                   H * D);
  }
  // From the residual stream's gradient (dres) to qkv's: the rotated heads'
  // when the part before rotated them, else the unrotated ones'.
  const A* backward(const BlockContext<A>& ctx, const BlockFlow<A>& in, const A*) override {
    const RankShape& s = ctx.shape;
    const int B = ctx.B, T = ctx.T, N = ctx.N(), H = static_cast<int>(s.H);
    const int KV = static_cast<int>(s.KV), D = static_cast<int>(s.D);
    const A* att = att_.get(ctx.slot, ctx.block);
    const A* dres_full = ctx.sites.gather_dres(N);
    ctx.linear.backward(datt_, ctx.grad(row_), dres_full, att, weight(ctx), N, H * D,
                        static_cast<int>(s.C), ctx.sites.dres_row_amax());
    ctx.ops.attention_backward(dqkv_, datt_, in.hidden, att, lse_.get(ctx.slot, ctx.block),
                               ctx.doc_start, B, T, H, KV, D);
    if (!in.qk_rotated) {
      const RopeAngles rope = ctx.rope_angles();
      ctx.ops.rope_backward(dqkv_, rope.cos, rope.sin, rope.positions, N, T, H + KV, D,
                            static_cast<int>(s.QKV));
    }
    return dqkv_;
  }

 private:
  typename LinearLayers<A>::Weight weight(const BlockContext<A>& ctx) const {
    return ctx.linear.block_weight(ctx.slot, ctx.block, ctx.params, row_);
  }
  int row_;
  PerBlock<A> att_;      // (N, H * D) attention output before the projection
  PerBlock<float> lse_;  // (B, H, T) softmax log-sum-exp per query
  PerBlock<A> x_mid_;    // (n, C) the residual stream after attention
  A* dqkv_ = nullptr;    // (N, QKV)
  A* datt_ = nullptr;    // (N, H * D)
};

std::vector<BlockTensorSpec> attention_tensors(const ModelConfig& c) {
  return {{"attn.wo",
           {{"self_attn.o_proj.weight", c.dim}},
           c.n_heads * c.resolved_head_dim(),
           TensorParallelSplit::columns,
           /*output_projection=*/true}};
}

}  // namespace

extern const BlockPartDeclaration kAttention = {"attention",
                                                "attention",
                                                nullptr,
                                                {},
                                                attention_tensors,
                                                make_part<Attention, float>,
                                                make_part<Attention, Bf16>};

}  // namespace llm
