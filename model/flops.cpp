// FLOP counts from the model's shapes (see flops.h).
#include "model/flops.h"

#include "model/transformer.h"

namespace llm {

ModelFlops unit_pass_flops(const Config& config, int unit, Pass pass) {
  const ModelConfig& m = config.model;
  const TrainingConfig& t = config.training;
  const double C = m.dim, F = m.ffn_dim, V = m.vocab_size, H = m.n_heads;
  const double D = C / m.n_heads, QKV = (H + 2.0 * m.n_kv_heads) * D;
  const double B = t.micro_batch_size, T = t.seq_len, N = B * T;
  const double pass_factor = pass == Pass::forward ? 1.0 : 2.0;
  ModelFlops f;
  if (unit == 0) return f;  // the embedding: a lookup and a scatter-add
  if (unit == m.n_layers + 1) {
    f.matmul = pass_factor * 2.0 * N * V * C;
    return f;
  }
  const double pairs = T * (T + 1) / 2.0;  // causal query-key pairs per sequence and head
  const double attention_forward = 2.0 * 2.0 * D * pairs * H * B;
  // wqkv, wo (H D = C) and the SwiGLU FFN's gate, up and down.
  const double up_to_swiglu = 2.0 * N * (QKV * C + H * D * C + 2.0 * F * C);
  const double down = 2.0 * N * F * C;
  f.matmul = pass_factor * (up_to_swiglu + down);
  f.attention = pass_factor * attention_forward;
  const CheckpointingPlan checkpointing = checkpointing_plan(t);
  if (pass == Pass::backward && checkpointing.mode == Recompute::full &&
      checkpointing.checkpointed(unit - 1)) {
    // Forward again up to SwiGLU (everything but the down projection);
    // selective recomputation redoes norms and SwiGLU only: no matmuls.
    f.matmul += up_to_swiglu;
    f.attention += attention_forward;
  }
  return f;
}

ModelFlops step_flops(const Config& config) {
  Config whole = config;
  whole.training.activation_checkpointing = Recompute::none;
  whole.training.micro_batch_size = config.training.batch_size;
  ModelFlops f;
  for (int u = 0; u < config.model.n_layers + 2; ++u) {
    f += unit_pass_flops(whole, u, Pass::forward);
    f += unit_pass_flops(whole, u, Pass::backward);
  }
  return f;
}

}  // namespace llm
