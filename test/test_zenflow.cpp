// ZenFlow in one process: the real Trainer against ZenFlow's hand-written
// semantics (test/reference_zenflow.h), parameter by parameter, and a model
// trained from scratch with DeepSpeed's defaults landing near AdamW. Under
// mpirun: mpi_test_zenflow.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "test/reference_training.h"
#include "test/reference_zenflow.h"
#include "test/temp_dir.h"
#include "test/tiny_trainer.h"

namespace llm {
namespace {

using tiny_trainer::losses_of;
using tiny_trainer::tiny;

// ZenFlow against its hand-written semantics (test/reference_zenflow.h):
// chosen columns updated every step, the rest summed and applied every
// second step, with and without warm-up and overlap, over two choices. The
// same tolerances as plain AdamW: ZenFlow adds no arithmetic beyond a sum
// and a division per element.
TEST(ZenFlow, FollowsItsWrittenSemantics) {
  test_support::TempDir dir("llm_reference_zenflow_");
  const std::string shard = dir.file("train_000.bin");
  reference_training::write_reference_shard(shard);
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap_step, one warm-up round" : "no overlap, no warm-up");
    reference_training::ZenFlowReference zenflow;
    zenflow.overlap = overlap;
    zenflow.warm_up = overlap ? 1 : 0;
    zenflow.shapes = reference_training::tensor_shapes(
        config_parse(reference_training::kModelToml, "shapes", {"data.train=x"}).model);
    std::vector<std::string> overrides = {
        "training.micro_batch_size=4",
        "zenflow.enabled=true",
        "zenflow.topk_ratio=0.25",
        "zenflow.update_interval=2",
        "zenflow.select_interval=2",
        std::string("zenflow.overlap_step=") + (overlap ? "true" : "false"),
        "zenflow.full_warm_up_rounds=" + std::to_string(zenflow.warm_up)};
    reference_training::check_trainer_against_reference(comm_world(), shard, overrides, zenflow);
    // The choices must not hinge on rounding: every chosen column's norm
    // clears the best unchosen one by far more than fp32 noise.
    EXPECT_GT(zenflow.smallest_gap, 1e-3);
  }
}

// ZenFlow with DeepSpeed's defaults (5% of each matrix's columns on the
// device every step, the rest every 4 steps, overlapped) trains the tiny
// model from scratch to within 5% of AdamW's validation loss in 100 steps.
// The gap is not noise: 95% of the columns take one AdamW step per 4 steps,
// so from scratch ZenFlow lags, and more so the longer it trains (measured
// on the tiny data with documents as BOS + text + EOS: 5.00 against 4.85,
// 3.1%, at 100 steps; 8% at 200). The bound keeps the margin the first one
// had over its measurement (3% over 1.8%, when documents had no EOS): 1.6 x
// 3.1% = 5%. The demo model's curves are in docs/offload.md. A ZenFlow that
// dropped the host's columns would stay near the initial loss of ln(512) = 6.24.
TEST(ZenFlow, TrainsCloseToAdamW) {
  const std::vector<std::string> shape = {"training.steps=100", "training.eval_interval=0"};
  std::vector<std::string> zenflow = shape;
  zenflow.push_back("zenflow.enabled=true");
  Trainer adamw(tiny(shape), comm_world()), zen(tiny(zenflow), comm_world());
  losses_of(adamw, 100);
  losses_of(zen, 100);
  zen.engine().settle();  // the last host update, as a save would apply it
  const float adamw_val = adamw.evaluate(), zen_val = zen.evaluate();
  EXPECT_LT(zen_val, 1.05f * adamw_val);
  EXPECT_LT(adamw_val, std::log(512.0f) - 1.0f);
  EXPECT_GT(zen.engine().zenflow_stats()->host_updates, 20u);
}

}  // namespace
}  // namespace llm
