// ZenFlow written out by hand, as docs/offload.md states it ("CPU offload and
// ZenFlow"), for the hand-written training loop of reference_training.h:
// doubles, whole tensors, one (param, m, v) per element, no devices, no
// shards, nothing taken from parallel/. Per step t (1-based), g the gradient
// times the clip scale:
//  - t <= warm_up: AdamW on every element.
//  - At an interval's first step, choose again when nothing is chosen or
//    select_interval steps passed since the last choice: per matrix [rows,
//    cols] the k = ceil(topk_ratio * cols) columns of largest sum_r g[r,c]^2
//    (ties: lower column); 1-D tensors wholly.
//  - Chosen elements: AdamW(g) now. Others: a += g; at the interval's last
//    step (U steps) AdamW(a / U) with that step's lr and t, a = 0; the next
//    forward sees it, or with overlap the one after.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "test/reference_training.h"

namespace llm::reference_training {

struct ZenFlowReference {
  // The run's knobs and every tensor's shape ([n] or [rows, cols]).
  double topk_ratio = 0.25;
  int update_interval = 2, select_interval = 2, warm_up = 0;
  bool overlap = false;
  std::map<std::string, std::vector<int64_t>> shapes;

  NamedParams params, seen, m, v, sum;
  std::map<std::string, std::vector<bool>> chosen;  // per column
  bool have_choice = false, pending = false;
  int in_interval = 0, since_choice = 0;
  double smallest_gap = INFINITY;  // between the k-th and the (k+1)-th column norm, relative

  void start(const NamedParams& initial) {
    params = seen = initial;
    for (const auto& [name, p] : initial) {
      m[name] = v[name] = sum[name] = Vec(p.size(), 0.0);
    }
  }
  const NamedParams& visible() const { return seen; }
  const NamedParams& masters() const { return params; }

  size_t columns(const std::string& name) const {
    const auto& shape = shapes.at(name);
    return static_cast<size_t>(shape.back());
  }

  void choose(const NamedParams& grads) {
    for (const auto& [name, g] : grads) {
      const size_t cols = columns(name);
      std::vector<bool>& pick = chosen[name];
      if (shapes.at(name).size() < 2) {
        pick.assign(cols, true);
        continue;
      }
      std::vector<double> norm(cols, 0.0);
      for (size_t i = 0; i < g.size(); ++i) norm[i % cols] += g[i] * g[i];
      std::vector<size_t> order(cols);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return norm[a] > norm[b]; });
      const size_t k =
          std::clamp<size_t>(static_cast<size_t>(std::ceil(topk_ratio * cols)), 1, cols);
      pick.assign(cols, false);
      for (size_t j = 0; j < k; ++j) pick[order[j]] = true;
      if (k < cols) {
        smallest_gap =
            std::min(smallest_gap, (norm[order[k - 1]] - norm[order[k]]) / norm[order[k - 1]]);
      }
    }
    have_choice = true;
    since_choice = 0;
  }

  void step(const TrainingConfig& c, const NamedParams& grads, double lr, double clip, int t) {
    if (pending) seen = params;  // the overlapped host update becomes visible
    pending = false;
    if (t <= warm_up) {
      for (auto& [name, p] : params) {
        const double wd = decays(name) ? c.weight_decay : 0.0;
        for (size_t i = 0; i < p.size(); ++i) {
          adamw_element(c, p[i], m[name][i], v[name][i], grads.at(name)[i] * clip, lr, wd, t);
        }
      }
      seen = params;
      return;
    }
    if (in_interval == 0 && (!have_choice || since_choice >= select_interval)) choose(grads);
    for (auto& [name, p] : params) {
      const double wd = decays(name) ? c.weight_decay : 0.0;
      const size_t cols = columns(name);
      for (size_t i = 0; i < p.size(); ++i) {
        const double g = grads.at(name)[i] * clip;
        if (chosen[name][i % cols]) {
          adamw_element(c, p[i], m[name][i], v[name][i], g, lr, wd, t);
          seen[name][i] = p[i];
        } else {
          sum[name][i] += g;
        }
      }
    }
    ++in_interval;
    ++since_choice;
    if (in_interval < update_interval) return;
    for (auto& [name, p] : params) {
      const double wd = decays(name) ? c.weight_decay : 0.0;
      const size_t cols = columns(name);
      for (size_t i = 0; i < p.size(); ++i) {
        if (chosen[name][i % cols]) continue;
        adamw_element(c, p[i], m[name][i], v[name][i], sum[name][i] / in_interval, lr, wd, t);
        sum[name][i] = 0;
      }
    }
    in_interval = 0;
    if (overlap)
      pending = true;
    else
      seen = params;
  }
};

// Every tensor's shape, by name, for a model config.
inline std::map<std::string, std::vector<int64_t>> tensor_shapes(const ModelConfig& model) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorSpec& t : layout_build(model).tensors) shapes[t.name] = t.shape;
  return shapes;
}

}  // namespace llm::reference_training
