// What a save costs a plan row (cost_models/save_cost.h): the checkpoint
// bytes per rank are what a real save's shard holds (within its index's few
// KB), the writers and the busiest node follow the mesh and the mode, the
// write time is the node's bytes at the profile's disk rate, the stall the
// rank's bytes over its host link, and a copy that does not fit the host
// memory makes the row save blocking.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cost_models/save_cost.h"
#include "model/layout.h"
#include "parallel/comm.h"
#include "parallel/saved_state.h"
#include "parallel/topology.h"
#include "trainer/trainer.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

// The row of `config` at `world` ranks, as the planner builds it.
PlanRow row_of(const Config& config, int world) {
  PlanRow row;
  row.tensor_parallel = config.parallel.tensor_parallel;
  row.pipeline_parallel = config.parallel.pipeline_parallel;
  row.data_parallel = world / (row.tensor_parallel * row.pipeline_parallel);
  row.config = config;
  row.memory = memory_plan(config, sharding_plan(config.parallel, row.data_parallel));
  return row;
}

size_t saved_bytes_of_whole_model(const Config& config) {
  return layout_build(config.model).total_numel * kSavedBytesPerElement;
}

HardwareProfile h100() { return hardware_load("cost_models/hardware/h100_sxm.toml"); }

// One process saves tiny after a step: its shard holds the planned bytes
// plus its records' index, device-resident and offloaded alike.
TEST(SaveCost, RankBytesAreWhatARealSaveWrites) {
  const fs::path dir = fs::temp_directory_path() / "llm_test_save_cost";
  for (const std::string offload : {"none", "cpu"}) {
    SCOPED_TRACE(offload);
    fs::remove_all(dir);
    const Config config =
        config_load("configs/tiny.toml", {"checkpoint.dir=" + dir.string(),
                                          "checkpoint.resume=none", "logging.metrics=false",
                                          "parallel.mode=zero2", "offload.optimizer=" + offload});
    std::string saved;
    {
      Trainer trainer(config, comm_world());
      trainer.train_step(0);
      saved = trainer.save_checkpoint(1);
    }
    const SaveCost cost =
        save_cost(row_of(config, 1), 1, hardware_load("cost_models/hardware/cpu_dev_vm.toml"));
    EXPECT_EQ(cost.rank_bytes, saved_bytes_of_whole_model(config));
    const size_t shard = fs::file_size(saved + "/shard_00000.bin");
    EXPECT_GE(shard, cost.rank_bytes);
    EXPECT_LT(shard - cost.rank_bytes, size_t{16} << 10);
  }
  fs::remove_all(dir);
}

// Llama 3 8B at 16 ranks of 8 per node: ddp's one writer holds the model;
// zero3's 16 split it, 8 to a node; hybrid/8's writers are the first node's.
// The write time is the busiest node's bytes at the disk rate.
TEST(SaveCost, WritersAndTheBusiestNodeFollowTheMode) {
  const HardwareProfile hw = h100();
  auto cost_of = [&](std::vector<std::string> overrides) {
    return save_cost(row_of(config_load("configs/llama8b.toml", overrides), 16), 16, hw);
  };
  const size_t model = saved_bytes_of_whole_model(config_load("configs/llama8b.toml", {}));

  const SaveCost ddp = cost_of({"parallel.mode=ddp"});
  EXPECT_EQ(ddp.rank_bytes, model);
  EXPECT_EQ(ddp.node_bytes, model);

  const SaveCost zero3 = cost_of({"parallel.mode=zero3"});
  EXPECT_GE(zero3.rank_bytes * 16, model);
  EXPECT_LT(zero3.rank_bytes, model / 16 + model / 1000);  // the padding of a unit's shards
  EXPECT_LE(zero3.node_bytes, 8 * zero3.rank_bytes);
  EXPECT_GE(zero3.node_bytes * 2, model);  // the two nodes write the model between them

  const SaveCost hybrid = cost_of({"parallel.mode=hybrid", "parallel.shard_group_size=8"});
  EXPECT_EQ(hybrid.node_bytes, model);
  EXPECT_GE(hybrid.rank_bytes * 8, model);

  for (const SaveCost& c : {ddp, zero3, hybrid}) {
    EXPECT_DOUBLE_EQ(c.write_seconds,
                     static_cast<double>(c.node_bytes) / (hw.node.disk_write_gbps * 1e9));
  }
}

// The stall is the rank's bytes over its host link: twice the link, half the
// stall; twice the bytes (ddp against zero3 at 2 ranks), twice the stall.
TEST(SaveCost, StallScalesWithBytesOverTheLinkRate) {
  HardwareProfile hw = h100();
  const Config zero3 = config_load("configs/llama8b.toml", {"parallel.mode=zero3"});
  const SaveCost slow = save_cost(row_of(zero3, 2), 2, hw);
  EXPECT_DOUBLE_EQ(slow.stall_seconds,
                   static_cast<double>(slow.rank_bytes) / (hw.pcie.bandwidth_gbs * 1e9));
  hw.pcie.bandwidth_gbs *= 2;
  EXPECT_DOUBLE_EQ(save_cost(row_of(zero3, 2), 2, hw).stall_seconds, slow.stall_seconds / 2);
  hw.pcie.bandwidth_gbs /= 2;
  const SaveCost ddp =
      save_cost(row_of(config_load("configs/llama8b.toml", {"parallel.mode=ddp"}), 2), 2, hw);
  EXPECT_NEAR(ddp.stall_seconds / slow.stall_seconds, 2.0, 1e-3);
}

// A node whose host memory cannot hold the copy saves blocking, and its host
// bytes leave the copy out; with checkpoint.async off every row does.
TEST(SaveCost, ACopyThatDoesNotFitTheHostSavesBlocking) {
  HardwareProfile hw = h100();
  const Config config = config_load("configs/llama8b.toml", {"parallel.mode=zero3"});
  const SaveCost roomy = save_cost(row_of(config, 16), 16, hw);
  EXPECT_TRUE(roomy.async);
  EXPECT_EQ(roomy.host_bytes, roomy.rank_bytes);  // nothing offloaded: the copy alone
  EXPECT_EQ(roomy.host_available, size_t{2'000'000'000'000} / 8);

  hw.node.host_memory = "8GiB";  // 1 GiB a rank, under zero3's 5.6 GiB copy
  const SaveCost cramped = save_cost(row_of(config, 16), 16, hw);
  EXPECT_FALSE(cramped.copy_fits);
  EXPECT_FALSE(cramped.async);
  EXPECT_EQ(cramped.host_bytes, 0u);

  const Config blocking =
      config_load("configs/llama8b.toml", {"parallel.mode=zero3", "checkpoint.async=false"});
  const SaveCost off = save_cost(row_of(blocking, 16), 16, h100());
  EXPECT_TRUE(off.copy_fits);
  EXPECT_FALSE(off.async);
}

}  // namespace
}  // namespace llm
