// The real Trainer under mpirun against the hand-written training loop of
// test/reference_training.h, in the fully sharded mode and, on an even
// world, in hybrid groups of 2: the single-process comparison holds at every
// world size, so a bug shared by all modes cannot hide behind their agreement.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test/reference_training.h"
#include "test/reference_zenflow.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

// A fresh directory `name`_np<world> holding train_000.bin written by rank 0
// with `write`; returns the shard's path once every rank may read it.
template <class Write>
std::string shared_shard(Group& world, const std::string& name, Write write) {
  const fs::path dir = fs::temp_directory_path() / (name + "_np" + std::to_string(world.size()));
  const std::string shard = (dir / "train_000.bin").string();
  if (world.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    write(shard);
  }
  world.barrier();
  return shard;
}

void remove_shared_shard(Group& world, const std::string& shard) {
  world.barrier();
  if (world.rank() == 0) fs::remove_all(fs::path(shard).parent_path());
}

// zero3, and hybrid in groups of 2 where the world splits so.
std::vector<std::vector<std::string>> sharded_modes(const Group& world) {
  std::vector<std::vector<std::string>> modes = {{"parallel.mode=zero3"}};
  if (world.size() % 2 == 0) {
    modes.push_back({"parallel.mode=hybrid", "parallel.shard_group_size=2"});
  }
  return modes;
}

TEST(TrainingStepReference, ShardedModesFollowTheHandWrittenLoop) {
  Group& world = comm_world();
  const std::string shard =
      shared_shard(world, "llm_mpi_reference_step", reference_training::write_reference_shard);
  const auto modes = sharded_modes(world);
  for (const auto& mode : modes) {
    SCOPED_TRACE(mode.back());
    std::vector<std::string> overrides = mode;
    overrides.push_back("training.micro_batch_size=1");
    reference_training::check_trainer_against_reference(world, shard, overrides);
  }
  // ZenFlow over sharded gradients: each rank holds pieces of the matrices,
  // the column norms are all-reduced before the choice.
  for (const auto& mode : modes) {
    SCOPED_TRACE("zenflow " + mode.back());
    reference_training::ZenFlowReference zenflow;
    zenflow.overlap = true;
    zenflow.shapes = reference_training::tensor_shapes(
        config_parse(reference_training::kModelToml, "shapes", {"data.train=x"}).model);
    std::vector<std::string> overrides = mode;
    for (const char* o :
         {"training.micro_batch_size=1", "zenflow.enabled=true", "zenflow.topk_ratio=0.25",
          "zenflow.update_interval=2", "zenflow.select_interval=2", "zenflow.overlap_step=true"}) {
      overrides.push_back(o);
    }
    reference_training::check_trainer_against_reference(world, shard, overrides, zenflow);
  }
  remove_shared_shard(world, shard);
}

// Loss masks under mpirun: each rank's micro-batches keep other counts of
// targets, yet every rank scales its gradients by the global batch's kept
// count, so zero3 (and hybrid 2 x N/2) give the hand-written loop's loss,
// norm and parameters, as the single process does (test_training_step.cpp).
TEST(TrainingStepReference, LossMasksInShardedModesFollowTheHandWrittenLoop) {
  Group& world = comm_world();
  const std::string shard = shared_shard(world, "llm_mpi_reference_masked",
                                         reference_training::write_masked_reference_shard);
  for (const auto& mode : sharded_modes(world)) {
    SCOPED_TRACE(mode.back());
    std::vector<std::string> overrides = mode;
    overrides.push_back("training.micro_batch_size=1");
    reference_training::check_trainer_against_reference(world, shard, overrides, /*masked=*/true);
  }
  remove_shared_shard(world, shard);
}

}  // namespace
}  // namespace llm
