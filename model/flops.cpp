// FLOP counts from the model's shapes (see flops.h).
#include "model/flops.h"

#include "model/block.h"
#include "model/transformer.h"

namespace llm {

ModelFlops unit_pass_flops(const Config& config, int unit, Pass pass) {
  const ModelConfig& m = config.model;
  const TrainingConfig& t = config.training;
  const double C = m.dim, V = m.vocab_size, H = m.n_heads, D = m.resolved_head_dim();
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
  // The block's matmuls (block.h): all of them, and those a full
  // recomputation runs again.
  double matmuls = 0, recomputed = 0;
  for (const BlockTensorSpec& spec : block_tensors(m)) {
    if (!spec.matrix()) continue;
    const double flops = 2.0 * N * static_cast<double>(spec.rows()) * spec.columns;
    matmuls += flops;
    if (spec.recomputed) recomputed += flops;
  }
  f.matmul = pass_factor * matmuls;
  f.attention = pass_factor * attention_forward;
  const RecomputePlan recompute = recompute_plan(t);
  if (pass == Pass::backward && recompute.mode == Recompute::full &&
      recompute.recomputes(unit - 1)) {
    // Forward again up to SwiGLU (everything but the down projection);
    // selective recomputation redoes norms and SwiGLU only: no matmuls.
    f.matmul += recomputed;
    f.attention += attention_forward;
  }
  return f;
}

ModelFlops step_flops(const Config& config) {
  Config whole = config;
  whole.training.recompute = Recompute::none;
  whole.training.micro_batch_size = config.training.batch_size;
  ModelFlops f;
  for (int u = 0; u < config.model.n_layers + 2; ++u) {
    f += unit_pass_flops(whole, u, Pass::forward);
    f += unit_pass_flops(whole, u, Pass::backward);
  }
  return f;
}

}  // namespace llm
