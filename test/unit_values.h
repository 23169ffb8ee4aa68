// The values of every unit of a rank's layout, gathered whole and put one
// after another in unit order: the reduced gradients or the parameters, as
// the tests that compare two runs' bits collect them. Each gather is a
// collective over the unit's shard group (call it on every member).
#pragma once

#include <vector>

#include "model/layout.h"
#include "parallel/sharding_engine.h"

namespace llm::test_support {

inline std::vector<float> unit_values(ShardingEngine& engine, const ParameterLayout& layout,
                                      void (ShardingEngine::*gather)(int, float*)) {
  std::vector<float> all, unit;
  for (size_t u = 0; u < layout.units.size(); ++u) {
    unit.resize(layout.units[u].numel);
    (engine.*gather)(static_cast<int>(u), unit.data());
    all.insert(all.end(), unit.begin(), unit.end());
  }
  return all;
}

inline std::vector<float> unit_grads(ShardingEngine& engine, const ParameterLayout& layout) {
  return unit_values(engine, layout, &ShardingEngine::gather_grads);
}

inline std::vector<float> unit_params(ShardingEngine& engine, const ParameterLayout& layout) {
  return unit_values(engine, layout, &ShardingEngine::gather_params);
}

}  // namespace llm::test_support
