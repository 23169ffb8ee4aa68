// The op profile on the CUDA backend (events on the compute stream): the
// tiny config's step, fp32 and bf16, with the calls per step its model
// implies, the ops' times adding up to the steps, and the same losses as
// without the wrappers. Skips where there is no CUDA device; under the
// emulation the times are the emulated kernels' on the CPU.
#include <gtest/gtest.h>

#include "test/gpu_test_support.h"
#include "test/op_profile_checks.h"

namespace llm {
namespace {

TEST(GpuOpProfile, CallsTimesAndLossesOnCuda) {
  LLM_SKIP_WITHOUT_GPU();
  constexpr int kSteps = 3;
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const Config config = test_support::op_profile_config(
        {"training.device=cuda", std::string("training.precision=") + precision});
    const test_support::ProfiledSteps run = test_support::run_profiled_steps(config, kSteps);
    test_support::expect_calls_follow_the_model(config, run);
    test_support::expect_op_times_add_up(run);
    EXPECT_EQ(run.losses, test_support::plain_losses(config, kSteps));  // exact: the same kernels
  }
}

}  // namespace
}  // namespace llm
