// The offloaded optimizer's hand-offs, driven by hand through stand-in
// gradient and parameter stores (the engine's real ones are covered by
// mpi_test_offload.cpp): a gradient announced final is copied to the host
// at once, unless a queued host job still reads that unit's landing buffer
// (a delayed update, a ZenFlow accumulation), and then at fetch_grads after
// the job; a copy made for a step that never updated (a skipped step) is not
// used by the next one.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <vector>

#include "model/backend.h"
#include "model/layout.h"
#include "parallel/host_optimizer.h"

namespace llm {
namespace {

class StandInGrads final : public GradStore {
 public:
  explicit StandInGrads(const std::vector<UnitShard>& shards) {
    for (const UnitShard& s : shards) reduced_.emplace_back(s.shard, 0.0f);
  }
  float* acquire(int) override { return nullptr; }
  void release(int, bool) override {}
  void wait() override {}
  void zero() override {}
  float* reduced(int unit) override { return reduced_[unit].data(); }
  // What the real stores do when a unit's reduction finishes.
  void finish(int unit, float value) {
    std::fill(reduced_[unit].begin(), reduced_[unit].end(), value);
    announce_final(unit);
  }

 private:
  std::vector<std::vector<float>> reduced_;
};

class StandInParams final : public ParamStore {
 public:
  explicit StandInParams(const std::vector<UnitShard>& shards) {
    for (const UnitShard& s : shards) compute_.emplace_back(s.owned, 0.0f);
  }
  const void* acquire(int, Pass) override { return nullptr; }
  void release(int) override {}
  HeldParams held(int) const override { return {0, 0, nullptr}; }
  void* owned_compute(int unit) override { return compute_[unit].data(); }
  void gather(int, float*) override {}
  Bf16* optimizer_compute_copy(int) override { return nullptr; }
  void after_update() override {}
  void after_load() override {}

 private:
  std::vector<std::vector<float>> compute_;
};

struct OffloadedUnits {
  Config config = config_load(
      "configs/tiny.toml",
      {"offload.optimizer=cpu", "training.precision=fp32", "offload.delayed_update=true"});
  ParameterLayout layout = layout_build(config.model);
  std::vector<UnitShard> shards = unit_shards(layout, 1, 0);
  StandInGrads grads{shards};
  StandInParams params{shards};
  HostOptimizer host{layout, config, shards, backend_cpu(), params, grads};
  OffloadedUnits() {
    grads.on_final([this](int unit) { host.gradient_final(unit); });  // as the engine relays it
  }

  uint64_t bytes_of(int unit) const { return shards[unit].owned * sizeof(float); }
  bool landed(int unit, float value) {
    const float* g = host.unit(unit).grads;
    return std::all_of(g, g + shards[unit].owned, [&](float x) { return x == value; });
  }
};

TEST(HostOptimizer, ACopyWaitsForTheJobReadingItsLandingBuffer) {
  OffloadedUnits o;
  ASSERT_GE(o.shards.size(), 2u);
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  o.host.queue([open] { open.wait(); }, /*reads_grads_of=*/0);

  o.grads.finish(0, 1.0f);  // unit 0's buffer is still being read: no copy yet
  EXPECT_EQ(o.host.stats().to_host_bytes, 0u);
  EXPECT_TRUE(o.landed(0, 0.0f));
  o.grads.finish(1, 2.0f);  // unit 1's is free: copied at once
  EXPECT_EQ(o.host.stats().to_host_early_bytes, o.bytes_of(1));
  EXPECT_TRUE(o.landed(1, 2.0f));
  // A step takes unit 1 first (its copy started), then the rest in order.
  const std::vector<int> order = o.host.landing_order();
  ASSERT_EQ(order.size(), o.shards.size());
  EXPECT_EQ(order[0], 1);
  EXPECT_EQ(order[1], 0);

  gate.set_value();
  o.host.fetch_grads(0);  // after the job: copied now
  o.host.fetch_grads(1);  // already there: not copied again
  EXPECT_TRUE(o.landed(0, 1.0f));
  EXPECT_TRUE(o.landed(1, 2.0f));
  const OffloadStats stats = o.host.stats();
  EXPECT_EQ(stats.to_host_bytes, o.bytes_of(0) + o.bytes_of(1));
  EXPECT_EQ(stats.to_host_early_bytes, o.bytes_of(1));
}

TEST(HostOptimizer, ACopyFromAStepThatNeverUpdatedIsNotReused) {
  OffloadedUnits o;
  o.grads.finish(0, 3.0f);
  EXPECT_EQ(o.host.stats().to_host_bytes, o.bytes_of(0));
  o.host.begin_step();  // the step was skipped; the next one's gradient differs
  o.grads.finish(0, 4.0f);
  o.host.fetch_grads(0);
  EXPECT_TRUE(o.landed(0, 4.0f));
  EXPECT_EQ(o.host.stats().to_host_bytes, 2 * o.bytes_of(0));
}

}  // namespace
}  // namespace llm
