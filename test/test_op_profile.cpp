// The op profile of `./train bench --profile` on the CPU backend: every op
// of the tiny config's step with the calls per step its model implies, the
// ops' times adding up to the step, the same losses as without the wrappers,
// and one profiled backend at a time. The CUDA backend's twin is
// gpu_test_op_profile.cpp.
#include <gtest/gtest.h>

#include "test/error_of.h"
#include "test/op_profile_checks.h"

namespace llm {
namespace {

using test_support::op_profile_config;

constexpr int kSteps = 3;

TEST(OpProfile, EveryOpOfTheStepWithTheCallsTheModelImplies) {
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const Config config = op_profile_config({std::string("training.precision=") + precision});
    test_support::expect_calls_follow_the_model(config,
                                                test_support::run_profiled_steps(config, kSteps));
  }
}

TEST(OpProfile, OpTimesAddUpToTheSteps) {
  test_support::expect_op_times_add_up(
      test_support::run_profiled_steps(op_profile_config({}), kSteps));
}

TEST(OpProfile, ProfiledBackendGivesTheSameLosses) {
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const Config config = op_profile_config({std::string("training.precision=") + precision});
    EXPECT_EQ(test_support::run_profiled_steps(config, kSteps).losses,
              test_support::plain_losses(config, kSteps));  // exact: the same kernels run
  }
}

// Each op's wrapper has one slot: a second profile cannot bind while the
// first lives, and a table used after its profile is gone says so.
TEST(OpProfile, OneProfiledBackendAtATime) {
  Backend stale{};
  {
    OpProfile first(Device::cpu), second(Device::cpu);
    stale = profiled(backend_cpu(), first);
    EXPECT_NO_THROW(profiled(backend_cpu(), first));  // the same binding again
    EXPECT_NE(test_support::error_of([&] {
                profiled(backend_cpu(), second);
              }).find("one profiled backend at a time"),
              std::string::npos);
    float x[4] = {1, 2, 3, 4};
    stale.f32.fill_zero(x, 4);  // outside a step: runs, marks nothing
    EXPECT_EQ(x[3], 0.0f);
    EXPECT_TRUE(first.totals().empty());
  }
  float y[2] = {1, 2};
  EXPECT_NE(test_support::error_of([&] {
              stale.f32.fill_zero(y, 2);
            }).find("fill_zero<f32> called through a profiled backend whose OpProfile is gone"),
            std::string::npos);
  OpProfile again(Device::cpu);  // the slots are free again
  EXPECT_NO_THROW(profiled(backend_cpu(), again));
}

}  // namespace
}  // namespace llm
