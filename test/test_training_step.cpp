// The real Trainer, one process, against the hand-written training loop of
// test/reference_training.h: every step's loss, gradient norm and learning
// rate, and every parameter after it, with micro-batches accumulated (12 of 1
// sequence) and with the whole batch in one micro-batch.
#include <gtest/gtest.h>

#include "test/reference_training.h"
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

// Loss masks (a mask file beside the shard dropping about a third of the
// targets): the loss is the mean over the kept targets of the whole batch, so
// 12 micro-batches of 1 sequence, each keeping another count, give the
// gradient of the batch in one, and both follow the hand-written loop.
TEST(TrainingStepReference, LossMasksFollowTheHandWrittenLoop) {
  test_support::TempDir dir("llm_reference_masked_");
  const std::string shard = dir.file("train_000.bin");
  reference_training::write_masked_reference_shard(shard);
  for (const char* micro : {"training.micro_batch_size=1", "training.micro_batch_size=12"}) {
    SCOPED_TRACE(micro);
    reference_training::check_trainer_against_reference(comm_world(), shard, {micro},
                                                        /*masked=*/true);
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

}  // namespace
}  // namespace llm
