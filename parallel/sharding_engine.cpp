// World-of-one sharding engine: full state in three arenas.
#include "parallel/sharding_engine.h"

#include <cmath>

namespace llm {

StateBytes ShardingEngine::planned_bytes(const ParameterLayout& layout) {
  StateBytes b;
  for (const UnitSpec& u : layout.units) {
    b.params += align_up(u.numel * sizeof(float));
    b.grads += align_up(u.numel * sizeof(float));
    b.optimizer += 2 * align_up(u.numel * sizeof(float));
  }
  return b;
}

ShardingEngine::ShardingEngine(const ParameterLayout& layout, const Config& config,
                               const Backend& backend)
    : layout_(layout), training_(config.training), be_(backend), bytes_(planned_bytes(layout)) {
  param_arena_ = Arena("parameters", bytes_.params);
  grad_arena_ = Arena("gradients", bytes_.grads);
  optimizer_arena_ = Arena("optimizer", bytes_.optimizer);
  const size_t n_units = layout.units.size();
  params_.resize(n_units);
  grads_.resize(n_units);
  m_.resize(n_units);
  v_.resize(n_units);
  for (size_t u = 0; u < n_units; ++u) {
    size_t n = layout.units[u].numel;
    params_[u] = param_arena_.alloc<float>(n);
    grads_[u] = grad_arena_.alloc<float>(n);
    m_[u] = optimizer_arena_.alloc<float>(n);
    v_[u] = optimizer_arena_.alloc<float>(n);
    layout_init_params(layout, config.model, static_cast<uint64_t>(config.training.seed),
                       static_cast<int>(u), 0, n, params_[u]);
  }
}

const float* ShardingEngine::acquire_params(int unit, Pass) { return params_[unit]; }
void ShardingEngine::release_params(int, Pass) {}
float* ShardingEngine::acquire_grads(int unit) { return grads_[unit]; }
void ShardingEngine::release_grads(int) {}

void ShardingEngine::zero_grads() {
  for (size_t u = 0; u < grads_.size(); ++u) be_.fill_zero(grads_[u], layout_.units[u].numel);
}

float ShardingEngine::grad_norm() {
  double sum = 0;
  for (size_t u = 0; u < grads_.size(); ++u) sum += be_.sum_squares(grads_[u], layout_.units[u].numel);
  return static_cast<float>(std::sqrt(sum));
}

void ShardingEngine::optimizer_step(const AdamWStep& step) {
  for (size_t u = 0; u < params_.size(); ++u) {
    optimizer_update_slice(be_, layout_, training_, step, static_cast<int>(u), 0,
                           layout_.units[u].numel, params_[u], grads_[u], m_[u], v_[u]);
  }
}

}  // namespace llm
