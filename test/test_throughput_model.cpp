// The throughput model in one process: hardware profiles parse (and reject
// what they should), per-unit FLOPs add up to the benchmark's step FLOPs, the
// alpha-beta ring cost follows its formula and the group layout, the replay
// overlaps what it may and nothing more, and the T5 configs reproduce the
// paper's memory findings through the planner's accounting. (Traffic equal
// to the engine's CommStats is tested under mpirun.)
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "trainer/benchmark.h"
#include "runtime/error.h"
#include "planning/hardware_profile.h"
#include "planning/scaling.h"
#include "planning/throughput_model.h"
#include "trainer/trainer.h"
#include "parallel/topology.h"
#include "test/error_of.h"

namespace llm {
namespace {

using test_support::error_of;

HardwareProfile a100() { return hardware_load("planning/hardware/a100_80gb_roce.toml"); }

Config with(const std::string& path, std::vector<std::string> overrides) {
  return config_load(path, overrides);
}

TEST(HardwareProfile, EveryShippedProfileLoads) {
  for (const char* path : {"planning/hardware/a100_80gb_roce.toml", "planning/hardware/h100_sxm.toml",
                           "planning/hardware/cpu_dev_vm.toml"}) {
    SCOPED_TRACE(path);
    HardwareProfile hw = hardware_load(path);
    EXPECT_GT(hw.rank_flops(Precision::bf16, 1), 0);
    EXPECT_GT(hw.rank_memory_bytes(1), 0u);
  }
  HardwareProfile hw = a100();
  EXPECT_EQ(hw.node.devices_per_node, 8);
  EXPECT_DOUBLE_EQ(hw.rank_flops(Precision::bf16, 8), 312e12 * 0.6);
}

TEST(HardwareProfile, RejectsUnknownAndMissingKeys) {
  std::string text = R"(
[device]
memory = "80GiB"
reserved_memory = "0"
peak_tflops_bf16 = 1.0
peak_tflops_fp32 = 1.0
sustained_fraction = 0.5
memory_bandwidth_gbs = 1.0
shared_by_node = true
[node]
devices_per_node = 4
[intra_node]
bandwidth_gbs = 1.0
latency_us = 1.0
[inter_node]
bandwidth_gbs = 1.0
latency_us = 1.0
[collective]
base_latency_us = 0.0
async_progress = false
)";
  HardwareProfile hw = hardware_parse(text, "x.toml");
  EXPECT_EQ(hw.rank_memory_bytes(4), (80ull << 30) / 4);  // shared by the node's ranks
  EXPECT_DOUBLE_EQ(hw.rank_flops(Precision::fp32, 4), 1e12 * 0.5 / 4);
  std::string typo = text;
  typo.insert(typo.find("[inter_node]"), "latency_ms = 1.0\n");
  EXPECT_NE(error_of([&] { hardware_parse(typo, "x.toml"); }).find("unknown key intra_node.latency_ms"),
            std::string::npos);
  std::string missing = text;
  missing.erase(missing.find("base_latency_us = 0.0"), 21);
  EXPECT_NE(error_of([&] { hardware_parse(missing, "x.toml"); }).find("collective.base_latency_us: missing"),
            std::string::npos);
  std::string fraction = text;
  fraction.replace(fraction.find("0.5"), 3, "1.5");
  EXPECT_NE(error_of([&] { hardware_parse(fraction, "x.toml"); }).find("sustained_fraction"),
            std::string::npos);
}

// The model's per-unit FLOPs are the benchmark's step FLOPs, split.
TEST(ThroughputModel, UnitFlopsAddUpToStepFlops) {
  for (const char* path : {"configs/tiny.toml", "configs/25m.toml", "configs/t5_611m.toml"}) {
    SCOPED_TRACE(path);
    Config c = with(path, {});
    const int world = 1;
    const int micro = micro_batches_per_step(c.training, world);
    double sum = 0;
    for (int u = 0; u < c.model.n_layers + 2; ++u) {
      sum += unit_pass_flops(c, u, Pass::forward) + unit_pass_flops(c, u, Pass::backward);
    }
    EXPECT_NEAR(sum * micro * world, step_flops(c).total(), 1e-9 * step_flops(c).total());
    // Full recomputation adds a forward up to SwiGLU to every block's backward.
    Config full = with(path, {"training.activation_checkpointing=full"});
    double extra = unit_pass_flops(full, 1, Pass::backward) - unit_pass_flops(c, 1, Pass::backward);
    EXPECT_GT(extra, 0.3 * unit_pass_flops(c, 1, Pass::forward));
    EXPECT_LT(extra, unit_pass_flops(c, 1, Pass::forward));
  }
}

TEST(ThroughputModel, GroupsSpanNodesAsTheTopologyPlacesThem) {
  GroupSpan shard = group_span(GroupRole::shard, 64, 8, 8);  // hybrid: a node per shard group
  EXPECT_EQ(shard.size, 8);
  EXPECT_EQ(shard.nodes, 1);
  GroupSpan replicate = group_span(GroupRole::replicate, 64, 8, 8);
  EXPECT_EQ(replicate.size, 8);
  EXPECT_EQ(replicate.nodes, 8);
  EXPECT_EQ(replicate.ranks_per_node, 1);
  GroupSpan world = group_span(GroupRole::world, 64, 64, 8);
  EXPECT_EQ(world.nodes, 8);
  EXPECT_EQ(world.ranks_per_node, 8);
}

TEST(ThroughputModel, RingCostFollowsTheAlphaBetaFormula) {
  const HardwareProfile hw = a100();
  const double gb = 1e9;
  EXPECT_EQ(collective_seconds(CollectiveOp::all_gather, {1, 1, 1}, gb, hw), 0);
  // 16 ranks on 2 nodes: 15 steps of which 1 crosses nodes; the NICs (250
  // GB/s per node) are faster than NVLink's 235 bus bandwidth here.
  double expected = 1e-6 * (8.4 + 14 * 3.4 + 1 * 9.6) + (15.0 / 16.0) * gb / 235e9;
  EXPECT_NEAR(collective_seconds(CollectiveOp::all_gather, {16, 2, 8}, gb, hw), expected, 1e-12);
  // All-reduce: twice the steps and twice the bytes.
  double all_reduce = 1e-6 * (8.4 + 28 * 3.4 + 2 * 9.6) + 2 * (15.0 / 16.0) * gb / 235e9;
  EXPECT_NEAR(collective_seconds(CollectiveOp::all_reduce, {16, 2, 8}, gb, hw), all_reduce, 1e-12);
  // One rank per node drives one NIC of eight: 250 / 8 GB/s.
  double replicas = 1e-6 * (8.4 + 0 * 3.4 + 14 * 9.6) + 2 * (7.0 / 8.0) * gb / (250e9 / 8);
  EXPECT_NEAR(collective_seconds(CollectiveOp::all_reduce, {8, 8, 1}, gb, hw), replicas, 1e-12);
}

// With a free network the step is exactly compute + optimizer; without
// asynchronous progress nothing overlaps; with it the step lies in between.
TEST(ThroughputModel, ReplayOverlapsOnlyWhatTheEngineOverlaps) {
  Config c = with("configs/tiny.toml",
                  {"parallel.mode=zero3", "training.batch_size=16", "training.micro_batch_size=1"});
  HardwareProfile hw = a100();
  const StepPrediction overlapped = throughput_predict(c, 16, hw);
  EXPECT_GT(overlapped.comm_seconds, 0);
  EXPECT_GE(overlapped.step_seconds, overlapped.compute_seconds + overlapped.optimizer_seconds);
  EXPECT_LT(overlapped.step_seconds,
            overlapped.compute_seconds + overlapped.optimizer_seconds + overlapped.comm_seconds);

  HardwareProfile serial = hw;
  serial.collective.async_progress = false;
  const StepPrediction blocking = throughput_predict(c, 16, serial);
  EXPECT_NEAR(blocking.step_seconds,
              blocking.compute_seconds + blocking.optimizer_seconds + blocking.comm_seconds,
              1e-9 * blocking.step_seconds);

  HardwareProfile free = hw;
  free.intra_node = free.inter_node = {1e12, 0};
  free.collective.base_latency_us = 0;
  const StepPrediction ideal = throughput_predict(c, 16, free);
  EXPECT_NEAR(ideal.step_seconds, ideal.compute_seconds + ideal.optimizer_seconds,
              1e-6 * ideal.step_seconds);
  EXPECT_DOUBLE_EQ(ideal.compute_seconds, overlapped.compute_seconds);
}

TEST(ThroughputModel, HybridOverOneGroupIsFullSharding) {
  Config zero3 = with("configs/tiny.toml", {"parallel.mode=zero3"});
  Config hybrid = with("configs/tiny.toml", {"parallel.mode=hybrid", "parallel.shard_group_size=4"});
  const HardwareProfile hw = a100();
  StepPrediction a = throughput_predict(zero3, 4, hw), b = throughput_predict(hybrid, 4, hw);
  EXPECT_DOUBLE_EQ(a.step_seconds, b.step_seconds);
  EXPECT_EQ(a.traffic[static_cast<int>(CollectiveOp::all_gather)].sent_bytes,
            b.traffic[static_cast<int>(CollectiveOp::all_gather)].sent_bytes);
}

TEST(ThroughputModel, DdpBucketsSendTheSameBytesInFewerCalls) {
  Config c = with("configs/25m.toml", {"parallel.mode=ddp", "training.batch_size=128"});
  const HardwareProfile hw = a100();
  ThroughputOptions buckets;
  buckets.ddp_bucket_bytes = 25u << 20;
  StepPrediction per_unit = throughput_predict(c, 16, hw), bucketed = throughput_predict(c, 16, hw, buckets);
  const OpTraffic& a = per_unit.traffic[static_cast<int>(CollectiveOp::all_reduce)];
  const OpTraffic& b = bucketed.traffic[static_cast<int>(CollectiveOp::all_reduce)];
  EXPECT_EQ(a.payload_bytes, b.payload_bytes);
  EXPECT_EQ(a.calls, 10u);  // 8 blocks, embedding, head: one all-reduce per unit
  EXPECT_LT(b.calls, a.calls);
}

TEST(ThroughputModel, MoreBandwidthNeverSlowsAStep) {
  const HardwareProfile hw = a100();
  HardwareProfile faster = hw;
  faster.inter_node.bandwidth_gbs *= 4;
  for (const char* mode : {"ddp", "zero2", "zero3"}) {
    SCOPED_TRACE(mode);
    Config c = with("configs/25m.toml", {std::string("parallel.mode=") + mode,
                                          "training.batch_size=64", "training.micro_batch_size=2"});
    EXPECT_LE(throughput_predict(c, 32, faster).step_seconds, throughput_predict(c, 32, hw).step_seconds);
  }
}

TEST(Scaling, PaperStrategiesMapToEngineModes) {
  EXPECT_EQ(strategy_mode("full_shard", 64, 8).mode, ParallelMode::zero3);
  StrategyMode hybrid = strategy_mode("hybrid", 64, 8);
  EXPECT_EQ(hybrid.mode, ParallelMode::hybrid);
  EXPECT_EQ(hybrid.shard_group_size, 8);
  EXPECT_EQ(strategy_mode("hybrid", 4, 8).shard_group_size, 4);  // one node: one group
  EXPECT_EQ(strategy_mode("full_replication", 64, 8).mode, ParallelMode::ddp);
  EXPECT_FALSE(strategy_mode("full_replication", 64, 8).ddp_buckets);
  EXPECT_TRUE(strategy_mode("ddp", 64, 8).ddp_buckets);
  EXPECT_NE(error_of([] { strategy_mode("zero9", 8, 8); }).find("unknown strategy"), std::string::npos);
}

// The paper's memory findings, through the planner's accounting: DDP holds
// T5 2.28B on an A100 80GB but not 11.3B; full sharding holds 11.3B on 8.
TEST(Scaling, T5ConfigsReproduceThePapersOutOfMemoryPoints) {
  const size_t limit = a100().rank_memory_bytes(8);
  auto bytes = [](const char* path, const char* mode) {
    Config c = config_load(path, {std::string("parallel.mode=") + mode, "training.batch_size=64"});
    return memory_plan(c, sharding_plan(c.parallel, 8)).total();
  };
  EXPECT_LE(bytes("configs/t5_2.28b.toml", "ddp"), limit);
  EXPECT_GT(bytes("configs/t5_11.3b.toml", "ddp"), limit);
  EXPECT_LE(bytes("configs/t5_11.3b.toml", "zero3"), limit);
}

}  // namespace
}  // namespace llm
