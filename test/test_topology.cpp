// Parallel mode presets and the invalid combinations that must fail before
// anything is allocated, with one line naming the key.
#include <gtest/gtest.h>

#include "schema/config.h"
#include "base/error.h"
#include "test/error_of.h"
#include "commands/host_pool.h"
#include "cost_models/memory_plan.h"
#include "trainer/launch_validate.h"
#include "trainer/trainer.h"
#include "parallel/topology.h"

namespace llm {
namespace {

using test_support::error_of;

// The error loading configs/tiny.toml with `overrides` raises ("" if none).
std::string config_refusal(const std::vector<std::string>& overrides) {
  return error_of([&] { config_load("configs/tiny.toml", overrides); });
}

// [parallel] with mode given by its name in the config, as a user writes it.
ParallelConfig parallel(const char* mode, int shard_group_size) {
  return {parse_enum<ParallelMode>(mode, "parallel.mode"), shard_group_size};
}

TEST(Topology, ModesArePresetsOfOneTuple) {
  ShardingPlan ddp = sharding_plan(parallel("ddp", 0), 4);
  EXPECT_FALSE(ddp.shard_optimizer || ddp.shard_grads || ddp.shard_params);
  EXPECT_EQ(ddp.shard_group_size, 1);
  ShardingPlan z1 = sharding_plan(parallel("zero1", 0), 4);
  EXPECT_TRUE(z1.shard_optimizer && !z1.shard_grads && !z1.shard_params);
  ShardingPlan z2 = sharding_plan(parallel("zero2", 0), 4);
  EXPECT_TRUE(z2.shard_optimizer && z2.shard_grads && !z2.shard_params);
  ShardingPlan z3 = sharding_plan(parallel("zero3", 0), 4);
  EXPECT_TRUE(z3.shard_optimizer && z3.shard_grads && z3.shard_params);
  EXPECT_EQ(z3.shard_group_size, 4);
  EXPECT_EQ(sharding_plan(parallel("fsdp", 0), 4).mode, ParallelMode::zero3);
  ShardingPlan hybrid = sharding_plan(parallel("hybrid", 2), 6);
  EXPECT_TRUE(hybrid.shard_params);
  EXPECT_EQ(hybrid.shard_group_size, 2);
}

// The config alone refuses a shard group without hybrid, and hybrid without
// one; the launch (launch_validate) one that does not divide its world's
// data-parallel ranks. Each names the key and where its value came from.
TEST(Topology, InvalidCombinationsNameTheKey) {
  EXPECT_NE(config_refusal({"parallel.mode=hybrid"})
                .find("command line --parallel.mode=hybrid: parallel.mode = hybrid needs "
                      "parallel.shard_group_size"),
            std::string::npos);
  EXPECT_NE(config_refusal({"parallel.mode=zero3", "parallel.shard_group_size=2"})
                .find("command line --parallel.shard_group_size=2: parallel.shard_group_size is "
                      "only used by mode hybrid"),
            std::string::npos);
  const Config hybrid =
      config_load("configs/tiny.toml", {"parallel.mode=hybrid", "parallel.shard_group_size=3"});
  EXPECT_NE(error_of([&] { launch_validate(hybrid, 4, nullptr, false); })
                .find("command line --parallel.shard_group_size=3: parallel.shard_group_size (3) "
                      "must divide the data-parallel size (4)"),
            std::string::npos);
  const Config hybrid_pairs =
      config_load("configs/tiny.toml", {"parallel.mode=hybrid", "parallel.shard_group_size=2"});
  EXPECT_EQ(error_of([&] { launch_validate(hybrid_pairs, 4, nullptr, false); }), "");
}

// parallel.memory_per_rank is a rule of the world (zero3 shards the state
// over more ranks, so a larger world needs less per rank): the launch and
// the supervisor's choice of world (largest_fitting_world over the same
// launch_validate) refuse a world whose plan exceeds it, naming the figures.
TEST(Topology, AWorldWhosePlanExceedsMemoryPerRankIsRefused) {
  const Config zero3 = config_load("configs/tiny.toml", {"parallel.mode=zero3"});
  const size_t one = memory_plan(zero3, sharding_plan(zero3.parallel, 1)).total();
  const size_t two = memory_plan(zero3, sharding_plan(zero3.parallel, 2)).total();
  ASSERT_LT(two, one);
  auto with_limit = [](size_t bytes) {
    return config_load(
        "configs/tiny.toml",
        {"parallel.mode=zero3", "parallel.memory_per_rank=" + std::to_string(bytes) + "B"});
  };
  const Config between = with_limit((one + two) / 2);
  const std::string refusal = error_of([&] { launch_validate(between, 1, nullptr, false); });
  EXPECT_NE(refusal.find("needs"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("in mode zero3"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("but parallel.memory_per_rank gives"), std::string::npos) << refusal;
  EXPECT_EQ(error_of([&] { launch_validate(between, 2, nullptr, false); }), "");
  auto largest = [](const Config& config) {
    return largest_fitting_world(2, [&](int world) {
      return error_of([&] { launch_validate(config, world, nullptr, false); }).empty();
    });
  };
  EXPECT_EQ(largest(between), 2);
  EXPECT_EQ(largest(with_limit(two)), 2);  // exactly enough
  EXPECT_EQ(largest(with_limit(two - 1)), 0);
  // The rank's own check takes the smaller of the limit and what it finds.
  EXPECT_EQ(rank_memory_available(with_limit(1000), 1).bytes, 1000u);
  EXPECT_NE(config_refusal({"parallel.memory_per_rank=70"}).find("parallel.memory_per_rank"),
            std::string::npos);
}

// The mesh: tensor_parallel must divide the world, and split the model's
// heads, kv heads, ffn columns, vocabulary and sequence rows evenly; each
// refusal names the keys.
TEST(Topology, TensorParallelDegreeMustDivideTheWorldAndTheModel) {
  ParallelConfig tp = parallel("zero3", 0);
  tp.tensor_parallel = 2;
  EXPECT_EQ(data_parallel_size(tp, 8), 4);
  tp.tensor_parallel = 3;
  EXPECT_NE(error_of([&] { data_parallel_size(tp, 8); })
                .find("parallel.tensor_parallel (3) x parallel.pipeline_parallel (1) must divide "
                      "the world size (8)"),
            std::string::npos);
  // tiny: 4 heads, 2 kv heads, ffn 160, vocabulary 512, sequences of 32.
  EXPECT_EQ(config_refusal({"parallel.tensor_parallel=2"}), "");
  EXPECT_NE(config_refusal({"parallel.tensor_parallel=4"}).find("must divide model.n_kv_heads (2)"),
            std::string::npos);
  EXPECT_NE(
      config_refusal({"parallel.tensor_parallel=0"}).find("parallel.tensor_parallel must be >= 1"),
      std::string::npos);
  EXPECT_NE(config_refusal({"parallel.tensor_parallel=3"}).find("must divide model.n_heads (4)"),
            std::string::npos);
}

// Pipeline stages: at most one per block, T x P dividing the world, and no
// tied LM head (it would need the embedding on both ends).
TEST(Topology, PipelineStagesMustFitTheModelAndTheWorld) {
  ParallelConfig mesh = parallel("ddp", 0);
  mesh.tensor_parallel = 2;
  mesh.pipeline_parallel = 2;
  EXPECT_EQ(data_parallel_size(mesh, 8), 2);
  EXPECT_NE(error_of([&] { data_parallel_size(mesh, 6); })
                .find("parallel.tensor_parallel (2) x parallel.pipeline_parallel (2) must divide "
                      "the world size (6)"),
            std::string::npos);
  // tiny: 2 blocks, tied embeddings.
  EXPECT_EQ(config_refusal({"parallel.pipeline_parallel=2", "model.tie_embeddings=false"}), "");
  EXPECT_NE(
      config_refusal({"parallel.pipeline_parallel=2"}).find("needs model.tie_embeddings = false"),
      std::string::npos);
  EXPECT_NE(config_refusal({"parallel.pipeline_parallel=3", "model.tie_embeddings=false"})
                .find("parallel.pipeline_parallel must be in [1, model.n_layers = 2]"),
            std::string::npos);
  EXPECT_NE(config_refusal({"parallel.pipeline_parallel=0"})
                .find("parallel.pipeline_parallel must be in"),
            std::string::npos);
  EXPECT_NE(
      config_refusal({"parallel.pipeline_schedule=zigzag"}).find("parallel.pipeline_schedule"),
      std::string::npos);
}

TEST(Topology, BatchMustSplitOverMicroBatchesAndRanks) {
  TrainingConfig t;
  t.batch_size = 12;
  t.micro_batch_size = 2;
  EXPECT_EQ(micro_batches_per_step(t, 3), 2);
  EXPECT_NE(error_of([&] { micro_batches_per_step(t, 4); })
                .find("training.batch_size (12) must be a multiple of training.micro_batch_size "
                      "(2) x data-parallel ranks (4)"),
            std::string::npos);
}

}  // namespace
}  // namespace llm
