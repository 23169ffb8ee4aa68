// The Llama block's parameter table (see block.h).
#include "model/block.h"

namespace llm {

int64_t BlockTensorSpec::rows() const {
  int64_t total = 0;
  for (const TensorPart& part : parts) total += part.rows;
  return total;
}

std::vector<BlockTensorSpec> block_tensors(const ModelConfig& c) {
  using Split = TensorParallelSplit;
  const int64_t C = c.dim, D = c.resolved_head_dim(), F = c.ffn_dim;
  const int64_t q_rows = c.n_heads * D, kv_rows = c.n_kv_heads * D;
  std::vector<BlockTensorSpec> tensors = {
      {"attn_norm.weight", &BlockTensors::attn_norm, {{"input_layernorm.weight", C}}},
      {"attn.wqkv",
       &BlockTensors::wqkv,
       {{"self_attn.q_proj.weight", q_rows},
        {"self_attn.k_proj.weight", kv_rows},
        {"self_attn.v_proj.weight", kv_rows}},
       C,
       Split::rows},
      {"attn.wo",
       &BlockTensors::wo,
       {{"self_attn.o_proj.weight", C}},
       q_rows,
       Split::columns,
       /*output_projection=*/true},
      {"mlp_norm.weight", &BlockTensors::mlp_norm, {{"post_attention_layernorm.weight", C}}},
      {"mlp.w13",
       &BlockTensors::w13,
       {{"mlp.gate_proj.weight", F}, {"mlp.up_proj.weight", F}},
       C,
       Split::rows},
      {"mlp.w2",
       &BlockTensors::w2,
       {{"mlp.down_proj.weight", C}},
       F,
       Split::columns,
       /*output_projection=*/true,
       /*recomputed=*/false},
  };
  if (c.qk_norm) {  // after wqkv: one gain per head kind, held whole by every rank
    tensors.insert(
        tensors.begin() + 2,
        {{"attn.q_norm.weight", &BlockTensors::q_norm, {{"self_attn.q_norm.weight", D}}},
         {"attn.k_norm.weight", &BlockTensors::k_norm, {{"self_attn.k_norm.weight", D}}}});
  }
  return tensors;
}

ReplicatedGains replicated_gains(const ModelConfig& config) {
  ReplicatedGains out;
  for (const BlockTensorSpec& spec : block_tensors(config)) {
    if (spec.split != TensorParallelSplit::replicated) continue;
    out.gains.push_back({spec.offset, spec.rows(), out.width});
    out.width += spec.rows();
  }
  return out;
}

}  // namespace llm
