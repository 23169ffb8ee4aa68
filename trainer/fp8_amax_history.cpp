// FP8 delayed scaling's amax history (see fp8_amax_history.h).
#include "trainer/fp8_amax_history.h"

#include <algorithm>
#include <bit>
#include <string>

#include "base/error.h"
#include "base/fp8.h"

namespace llm {

namespace {

// The larger amax (magnitude bits, so a NaN wins, as on the device).
float amax_max(float a, float b) {
  return std::bit_cast<float>(std::max(fp8_magnitude_bits(a), fp8_magnitude_bits(b)));
}

}  // namespace

std::vector<float> Fp8AmaxHistory::max() const {
  if (steps_.empty()) return {};
  std::vector<float> largest(inputs_, 0.0f);
  for (const std::vector<float>& step : steps_)
    for (size_t i = 0; i < inputs_; ++i) largest[i] = amax_max(largest[i], step[i]);
  return largest;
}

void Fp8AmaxHistory::push(std::vector<float> amax) {
  LLM_CHECK(amax.size() == inputs_, "fp8 amax history: a step of {} amaxes for {} inputs",
            amax.size(), inputs_);
  steps_.push_back(std::move(amax));
  while (steps_.size() > static_cast<size_t>(length_)) steps_.pop_front();
}

void Fp8AmaxHistory::restore(const std::vector<std::vector<float>>& steps,
                             const std::string& source) {
  steps_.clear();
  for (const std::vector<float>& step : steps) {
    LLM_CHECK(step.size() == inputs_,
              "{}: its fp8 amax history holds {} inputs per step, this model has {}", source,
              step.size(), inputs_);
    push(step);
  }
}

std::vector<float> fp8_amax_world_max(Group& world, const std::vector<float>& local) {
  const size_t n = local.size();
  std::vector<float> all(n * static_cast<size_t>(world.size()));
  world.all_gather(local.data(), all.data(), n, WireType::f32);
  std::vector<float> largest(n, 0.0f);
  for (size_t i = 0; i < all.size(); ++i) largest[i % n] = amax_max(largest[i % n], all[i]);
  return largest;
}

}  // namespace llm
