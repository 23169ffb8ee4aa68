// The q, k and v projections' biases (Qwen2, Qwen2.5; model.qkv_bias): one
// bias row per fused qkv column, added in place to the projection's output
// (after the matmul, in its storage type, so in bf16 after an FP8 GEMM), so
// the part keeps nothing of its own and any recomputation redoes it with the
// projection. Split by rows across a tensor-parallel group as wqkv is: each
// rank holds its heads' biases. Without QK-norm (model.qk_norm, read from the
// config: the part list puts QK-norm right after this part) the bias pass
// also applies RoPE to the q and k heads and says so in the flow
// (BlockFlow::qk_rotated), so the attention part skips its own RoPE; with
// QK-norm, QK-norm rotates. Backward: the biases' gradient is the column sums
// of the output's gradient, which passes through unchanged, or with RoPE
// turned back in place first. A model with it is Hugging Face's qwen2.
// Kernels: model/kernels/row_bias.*.
#include "model/block_part.h"

namespace llm {
namespace {

template <class A>
class QkvBias final : public BlockPart<A> {
 public:
  explicit QkvBias(int row) : row_(row) {}
  void plan(BlockActivations&, const RankShape&) override {}
  void pass(const BlockContext<A>& ctx, BlockFlow<A>& flow) const override {  // in place
    flow.set_hidden(flow.hidden, flow.hidden_row_amax, rotates(ctx));
  }
  void forward(const BlockContext<A>& ctx, const BlockFlow<A>& in) override {
    const RankShape& s = ctx.shape;
    ctx.ops.row_bias_forward(in.hidden, ctx.param(row_), ctx.N(), static_cast<int>(s.QKV),
                             static_cast<int>(s.H + s.KV), static_cast<int>(s.D), angles(ctx));
  }
  // dout is the next part's backward scratch (attention's dqkv when this
  // part rotates), which only this part and the projection's backward read:
  // with RoPE it is turned back there, in place, and passed on.
  const A* backward(const BlockContext<A>& ctx, const BlockFlow<A>&, const A* dout) override {
    const RankShape& s = ctx.shape;
    A* dqkv = const_cast<A*>(dout);
    ctx.ops.row_bias_backward(ctx.grad(row_), dqkv, ctx.N(), static_cast<int>(s.QKV),
                              static_cast<int>(s.H + s.KV), static_cast<int>(s.D), angles(ctx));
    return dqkv;
  }

 private:
  // Whether this part applies RoPE: when no QK-norm part follows to do it.
  static bool rotates(const BlockContext<A>& ctx) { return !ctx.config.qk_norm; }
  static RopeAngles angles(const BlockContext<A>& ctx) {
    return rotates(ctx) ? ctx.rope_angles() : RopeAngles{};
  }

  int row_;
};

std::vector<BlockTensorSpec> qkv_bias_tensors(const ModelConfig& c) {
  const int64_t D = c.resolved_head_dim(), q_rows = c.n_heads * D, kv_rows = c.n_kv_heads * D;
  return {{.name = "attn.bqkv",
           .parts = {{"self_attn.q_proj.bias", q_rows},
                     {"self_attn.k_proj.bias", kv_rows},
                     {"self_attn.v_proj.bias", kv_rows}},
           .split = TensorParallelSplit::rows,
           .init = TensorInit::zeros}};
}

}  // namespace

// Qwen2's config.json has neither head_dim (its heads are hidden_size /
// num_attention_heads wide) nor attention_bias (q, k and v always have one).
extern const BlockPartDeclaration kQkvBias = {
    "qkv_bias",
    "q, k and v biases",
    &ModelConfig::qkv_bias,
    {"qwen2", "Qwen2ForCausalLM", 0, /*head_dim_and_attention_bias_keys=*/false},
    qkv_bias_tensors,
    make_part<QkvBias, float>,
    make_part<QkvBias, Bf16>};

}  // namespace llm
