// Who keeps which block activation (see block_activations.h).
#include "model/block_activations.h"

namespace llm {

RecomputePlan recompute_plan(const TrainingConfig& t) {
  RecomputePlan plan;
  plan.every = t.recompute_every;
  plan.mode = t.recompute;
  return plan;
}

RankShape::RankShape(const ModelConfig& c, int B, int T, int tp_size)
    : N(static_cast<size_t>(B) * T),
      n(N / tp_size),
      C(c.dim),
      H(c.n_heads / tp_size),
      KV(c.n_kv_heads / tp_size),
      D(c.resolved_head_dim()),
      F(c.ffn_dim / tp_size),
      V(c.vocab_size / tp_size),
      QKV((H + 2 * KV) * D),
      HD(H * D),
      tp(tp_size) {}

BlockActivations::BlockActivations(int slots, LayerRange layers, RecomputePlan recompute)
    : slots_(slots), layers_(layers), recompute_(recompute) {}

void BlockActivations::redirect() const {
  for (const std::function<void()>& redirect : redirects_) redirect();
}

}  // namespace llm
