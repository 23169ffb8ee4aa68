// A StateSource (parallel/sharding_engine.h) reading parameters from one
// host vector of every unit, concatenated in unit order (what
// ShardingEngine::gather_all_params returns), so a test can load parameters
// it changed; moments start at zero.
#pragma once

#include <cstring>
#include <vector>

#include "model/layout.h"
#include "parallel/sharding_engine.h"

namespace llm::test_support {

class VectorSource : public StateSource {
 public:
  VectorSource(const ParameterLayout& layout, const std::vector<float>& params) : params_(params) {
    size_t offset = 0;
    for (const UnitSpec& unit : layout.units) {
      unit_offsets_.push_back(offset);
      offset += unit.numel;
    }
  }
  void read(int unit, size_t begin, size_t count, float* params, float*, float*) override {
    if (params)
      std::memcpy(params, params_.data() + unit_offsets_[unit] + begin, count * sizeof(float));
  }

 private:
  const std::vector<float>& params_;
  std::vector<size_t> unit_offsets_;
};

}  // namespace llm::test_support
