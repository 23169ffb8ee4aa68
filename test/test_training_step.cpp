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

}  // namespace
}  // namespace llm
