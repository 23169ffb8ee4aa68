// The memory planner (`./train plan`) on the shipped llama8b config: it fits
// the hardware its header names with the headroom it states, the planner
// counts fitting against device memory less the runtime's reserve, and its
// recommendation leaves kRecommendedHeadroom spare and names every flag it
// assumes (bf16 rows reduce gradients in bf16). On llama70b, the pipeline
// rows: every mesh T x P x D of the world, the bubble of the config's
// micro-batches, refused with tied embeddings or more stages than blocks,
// and the per-rank state falling with the stages.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "planning/planner.h"

namespace llm {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

Config llama8b() { return config_load("train_configs/llama8b.toml", {}); }

// train_configs/llama8b.toml: "mpirun -np 16 ... on 80 GB GPUs", zero3 + bf16,
// 54.4 GiB per rank of the 77 GiB usable.
TEST(Planner, ShippedLlama8bFitsSixteen80GiBGpusWithHeadroom) {
  const Config config = llama8b();
  const MemoryBudget gpu{80 * kGiB, kDeviceReserve};
  EXPECT_EQ(gpu.usable(), 77 * kGiB);
  const double needed =
      static_cast<double>(memory_plan(config, sharding_plan(config.parallel, 16)).total());
  EXPECT_LE(needed, (1.0 - kRecommendedHeadroom) * static_cast<double>(gpu.usable()));
  EXPECT_NEAR(needed / kGiB, 54.4, 0.05) << "the figure in train_configs/llama8b.toml's header";
}

// The recommendation is the first row (least communication, then least
// recomputation) within 90% of the usable memory. With the usable memory set
// so that the first row needs 95% of it, that row "fits" but would eat the
// headroom, so it is passed over; "fits" is judged on usable memory.
TEST(Planner, RecommendationKeepsHeadroomAndFitsCountTheReserve) {
  const Config config = llama8b();
  const size_t first_row = plan_memory(config, 16, 8, 0).front().memory.total();
  const size_t usable = static_cast<size_t>(static_cast<double>(first_row) / 0.95);
  const std::vector<PlanRow> rows = plan_memory(config, 16, 8, usable);
  EXPECT_TRUE(rows.front().fits);
  const PlanRow* best = plan_recommend(rows, usable);
  ASSERT_NE(best, nullptr);
  EXPECT_NE(best, &rows.front());
  const double limit = (1.0 - kRecommendedHeadroom) * static_cast<double>(usable);
  EXPECT_LE(static_cast<double>(best->memory.total()), limit);
  for (const PlanRow& row : rows) {
    if (&row == best) break;
    EXPECT_GT(static_cast<double>(row.memory.total()), limit) << row.mode << " came first";
  }
  for (const PlanRow& row : rows) EXPECT_EQ(row.fits, row.memory.total() <= usable) << row.mode;
}

TEST(Planner, RecommendedBf16FlagsIncludeTheBf16Reduction) {
  const Config config = llama8b();
  testing::internal::CaptureStdout();
  plan_print(config, 16, 8, {80 * kGiB, kDeviceReserve});
  const std::string out = testing::internal::GetCapturedStdout();
  const size_t line = out.find("recommended");
  ASSERT_NE(line, std::string::npos) << out;
  const std::string recommended = out.substr(line, out.find('\n', line) - line);
  EXPECT_NE(recommended.find("--training.precision=bf16 --parallel.reduce_dtype=bf16"),
            std::string::npos)
      << recommended;
  EXPECT_NE(out.find("80.00 GiB less 3.00 GiB reserved = 77.00 GiB usable"), std::string::npos)
      << out;
}

// Llama 3 8B on one 80 GB GPU: nothing fits with the optimizer on the
// device (its fp32 masters and moments alone are 90 GiB); with it offloaded
// the device keeps the bf16 copy, the gradients and the activations, and the
// host holds 18 bytes per parameter (fp32 masters, m, v, gradient landing,
// bf16 upload copy). The recommendation says so.
TEST(Planner, Llama8bOnOneGpuNeedsTheOptimizerOffloaded) {
  const Config config = llama8b();
  const MemoryBudget gpu{80 * kGiB, kDeviceReserve};
  const std::vector<PlanRow> rows = plan_memory(config, 1, 0, gpu.usable());
  const double params = static_cast<double>(layout_build(config.model).total_numel);
  bool any_offload = false;
  for (const PlanRow& row : rows) {
    if (row.offload == OffloadTarget::none) {
      EXPECT_FALSE(row.fits) << row.mode << " " << to_string(row.checkpointing);
      EXPECT_EQ(row.memory.state.host, 0u);
      continue;
    }
    any_offload = true;
    EXPECT_EQ(row.precision, Precision::bf16);
    EXPECT_EQ(row.memory.state.optimizer, 0u);
    EXPECT_NEAR(static_cast<double>(row.memory.state.host) / params, 18.0, 0.01);
  }
  ASSERT_TRUE(any_offload);
  const PlanRow* best = plan_recommend(rows, gpu.usable());
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->offload, OffloadTarget::cpu);
}

// Llama 3 70B on 64 ranks: P = 1, 2, 4, 8 each with T = 1, 2, 4, 8, every
// row's mesh the world, its bubble (P - 1) / (M + P - 1) with M = 512 / D
// micro-batches of one sequence per data-parallel rank.
TEST(Planner, PipelineRowsCoverEveryMeshWithItsBubble) {
  const Config config = config_load("train_configs/llama70b.toml", {});
  const std::vector<PlanRow> rows = plan_memory(config, 64, 8, 77 * kGiB);
  std::set<std::pair<int, int>> meshes;
  for (const PlanRow& row : rows) {
    meshes.insert({row.tensor_parallel, row.pipeline_parallel});
    EXPECT_EQ(row.tensor_parallel * row.pipeline_parallel * row.data_parallel, 64);
    const double M = 512.0 / row.data_parallel;
    EXPECT_DOUBLE_EQ(row.bubble, (row.pipeline_parallel - 1) / (M + row.pipeline_parallel - 1));
    EXPECT_EQ(row.memory.micro_batches, static_cast<int>(M));
    if (row.pipeline_parallel > 1) {
      EXPECT_EQ(row.offload, OffloadTarget::none);
      EXPECT_EQ(row.precision, Precision::bf16);
    }
  }
  EXPECT_EQ(meshes.size(), 16u);
  // Pipeline rows come after every P = 1 row, in increasing P.
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_LE(rows[i - 1].pipeline_parallel, rows[i].pipeline_parallel);
  }
  EXPECT_NE(plan_row_flags(rows.back(), 8).find("--parallel.pipeline_parallel=8"),
            std::string::npos);
  EXPECT_EQ(plan_row_flags(rows.front(), 8).find("pipeline"), std::string::npos);
}

TEST(Planner, PipelineRowsNeedUntiedEmbeddingsAndABlockPerStage) {
  auto degrees = [](const Config& config, int world) {
    std::set<int> p;
    for (const PlanRow& row : plan_memory(config, world, 0, 77 * kGiB))
      p.insert(row.pipeline_parallel);
    return p;
  };
  EXPECT_EQ(degrees(config_load("train_configs/llama70b.toml", {"model.tie_embeddings=true"}), 64),
            std::set<int>{1});
  // Two blocks: at most two stages; three ranks: no even split in two.
  const Config tiny = config_load("train_configs/tiny.toml", {"model.tie_embeddings=false"});
  EXPECT_EQ(degrees(tiny, 8), (std::set<int>{1, 2}));
  EXPECT_EQ(degrees(tiny, 3), std::set<int>{1});
  EXPECT_EQ(degrees(config_load("train_configs/tiny.toml", {}), 8), std::set<int>{1})
      << "tiny ties its head";
}

// Without sharding (ddp) a rank holds its stage's whole state: P stages of
// 80 blocks cut it by about P (the largest stage holds 80 / P blocks and the
// embedding or the head), so the rank's total falls at every step of P.
TEST(Planner, StatePerRankFallsWithPipelineStages) {
  const Config config = config_load("train_configs/llama70b.toml", {});
  size_t previous = 0;
  double ddp_params = 0;
  for (const PlanRow& row : plan_memory(config, 64, 8, 77 * kGiB)) {
    if (row.tensor_parallel != 1 || row.mode != "ddp" || row.checkpointing != Recompute::full ||
        row.precision != Precision::bf16 || row.offload != OffloadTarget::none) {
      continue;
    }
    SCOPED_TRACE(row.pipeline_parallel);
    const double params = static_cast<double>(row.memory.state.params);
    if (row.pipeline_parallel == 1) {
      ddp_params = params;
    } else {
      EXPECT_LT(row.memory.total(), previous);
      EXPECT_NEAR(params * row.pipeline_parallel / ddp_params, 1.0, 0.1);
    }
    previous = row.memory.total();
  }
  EXPECT_GT(ddp_params, 0);
}

}  // namespace
}  // namespace llm
