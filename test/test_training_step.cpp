// The real Trainer, one process, against the hand-written training loop of
// test/reference_training.h: every step's loss, gradient norm and learning
// rate, and every parameter after it, with micro-batches accumulated (12 of 1
// sequence) and with the whole batch in one micro-batch.
#include <gtest/gtest.h>

#include "test/reference_training.h"
#include "test/reference_zenflow.h"
#include "test/temp_dir.h"

namespace llm {
namespace {

TEST(TrainingStepReference, EveryParameterFollowsTheHandWrittenLoop) {
  test_support::TempDir dir("llm_reference_step_");
  const std::string shard = dir.file("train_000.bin");
  reference_training::write_reference_shard(shard);
  for (const char* micro : {"training.micro_batch_size=1", "training.micro_batch_size=12"}) {
    SCOPED_TRACE(micro);
    reference_training::check_trainer_against_reference(comm_world(), shard, {micro});
  }
}

// ZeRO-Offload with offload.delayed_update against its hand-written
// semantics (a one-step-stale forward, reference_training::DelayedAdamW),
// with micro-batches accumulated: the gradients go to the host as they
// become final while the worker may still run the last step's update. The
// same tolerances: the host runs the same AdamW on the same values.
TEST(TrainingStepReference, DelayedOffloadUpdateFollowsItsWrittenSemantics) {
  test_support::TempDir dir("llm_reference_delayed_");
  const std::string shard = dir.file("train_000.bin");
  reference_training::write_reference_shard(shard);
  for (const char* mode : {"parallel.mode=ddp", "parallel.mode=zero3"}) {
    SCOPED_TRACE(mode);
    reference_training::DelayedAdamW delayed;
    reference_training::check_trainer_against_reference(
        comm_world(), shard,
        {mode, "training.micro_batch_size=4", "offload.optimizer=cpu",
         "offload.delayed_update=true"},
        delayed);
  }
}

// ZenFlow against its hand-written semantics (test/reference_zenflow.h):
// chosen columns updated every step, the rest summed and applied every
// second step, with and without warm-up and overlap, over two choices. The
// same tolerances as plain AdamW: ZenFlow adds no arithmetic beyond a sum
// and a division per element.
TEST(TrainingStepReference, ZenFlowFollowsItsWrittenSemantics) {
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

}  // namespace
}  // namespace llm
