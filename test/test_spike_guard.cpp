// The loss-spike guard: its running-median rule on made-up series, and in the
// trainer, a spike injected by corrupting the weights (the final norm's gains
// scaled 30x, so every logit is) must leave the parameters untouched by that
// step's update, while the same injection without the guard changes them.
#include <gtest/gtest.h>

#include <filesystem>

#include "trainer/spike_guard.h"
#include "trainer/trainer.h"
#include "test/vector_source.h"

namespace llm {
namespace {

TEST(SpikeGuard, SkipsAJumpPastTheFactorAndKeepsItOutOfTheMedian) {
  SpikeGuard guard(/*loss_factor=*/2.0, /*grad_norm_factor=*/0.0, /*window=*/20);
  for (int i = 0; i < SpikeGuard::kMinHistory; ++i) {
    // Nothing is judged before the history is full, however wild.
    EXPECT_FALSE(guard.check(i == 3 ? 100.0 : 4.0 + 0.01 * i, 1.0)) << i;
  }
  const auto spike = guard.check(9.0, 1.0);
  ASSERT_TRUE(spike);
  EXPECT_NE(spike->reason.find("loss 9 > 2 x median"), std::string::npos) << spike->reason;
  EXPECT_NEAR(spike->median_loss, 4.05, 0.03);
  EXPECT_FALSE(guard.check(7.9, 1.0));  // below 2 x median: accepted
  EXPECT_TRUE(guard.check(9.0, 1.0));   // the earlier spike did not raise the median
}

TEST(SpikeGuard, GradNormFactorAndOffSwitch) {
  SpikeGuard grads(0.0, 5.0, 10), off(0.0, 0.0, 10);
  EXPECT_FALSE(off.enabled());
  for (int i = 0; i < SpikeGuard::kMinHistory; ++i) {
    EXPECT_FALSE(grads.check(4.0, 0.5));
    EXPECT_FALSE(off.check(4.0, 0.5));
  }
  EXPECT_FALSE(grads.check(1e6, 2.4));  // the loss is not watched with factor 0
  const auto spike = grads.check(4.0, 2.6);
  ASSERT_TRUE(spike);
  EXPECT_NE(spike->reason.find("grad norm"), std::string::npos) << spike->reason;
  EXPECT_FALSE(off.check(1e6, 1e6));
}

// Trains 12 steps, scales the last unit (final norm gains) by 30, then runs one
// more step; returns whether that step was skipped and whether it changed the
// parameters.
std::pair<bool, bool> inject_spike(const std::string& guard_factor) {
  Config config = config_load(
      "configs/tiny.toml",
      {"checkpoint.dir=" + (std::filesystem::temp_directory_path() / "llm_test_spike").string(),
       "logging.metrics=false", "checkpoint.resume=none",
       "training.spike_loss_factor=" + guard_factor});
  Trainer trainer(config, comm_world());
  for (int step = 0; step < 12; ++step) EXPECT_FALSE(trainer.train_step(step).skipped) << step;
  std::vector<float> params = trainer.engine().gather_all_params();
  const ParameterLayout& layout = trainer.model().layout();
  const size_t last_unit = layout.total_numel - layout.units.back().numel;
  for (size_t i = last_unit; i < params.size(); ++i) params[i] *= 30.0f;
  test_support::VectorSource source(layout, params);
  trainer.engine().load_state(source, /*with_moments=*/false);
  const StepResult spiked = trainer.train_step(12);
  const std::vector<float> after = trainer.engine().gather_all_params();
  const bool changed = std::memcmp(after.data(), params.data(), params.size() * sizeof(float)) != 0;
  return {spiked.skipped.has_value(), changed};
}

TEST(SpikeGuard, TrainerSkipsTheUpdateOfAnInjectedSpike) {
  const auto [skipped, changed] = inject_spike("2");
  EXPECT_TRUE(skipped);
  EXPECT_FALSE(changed) << "the skipped step updated the parameters";
  const auto [skipped_off, changed_off] = inject_spike("0");
  EXPECT_FALSE(skipped_off);
  EXPECT_TRUE(changed_off);
}

}  // namespace
}  // namespace llm
