// The memory planner (`./train plan`'s rows) on the shipped llama8b config:
// it fits the hardware its header names with the headroom it states, the
// planner counts fitting against device memory less the runtime's reserve,
// and each row's command line, loaded, is the row's config (every setting the
// row decides, bf16 rows reducing gradients in bf16). On llama70b, the
// pipeline rows: every mesh T x P x D of the world, the bubble of the
// config's micro-batches, refused with tied embeddings or more stages than
// blocks, and the per-rank state falling with the stages.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>

#include "model/transformer.h"
#include "cost_models/hardware_profile.h"
#include "cost_models/plan_ranking.h"
#include "cost_models/planner.h"

namespace llm {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

Config llama8b() { return config_load("configs/llama8b.toml", {}); }

// An 80 GB GPU as the H100 profile describes it (80 GiB, 3 GiB reserved).
MemoryBudget h100_memory() {
  return hardware_load("cost_models/hardware/h100_sxm.toml").rank_memory(8);
}

// configs/llama8b.toml: "mpirun -np 16 ... on 80 GB GPUs", zero3 + bf16,
// 52.7 GiB per rank of the 77 GiB usable.
TEST(Planner, ShippedLlama8bFitsSixteen80GiBGpusWithHeadroom) {
  const Config config = llama8b();
  const MemoryBudget gpu = h100_memory();
  EXPECT_EQ(gpu.usable(), 77 * kGiB);
  const double needed =
      static_cast<double>(memory_plan(config, sharding_plan(config.parallel, 16)).total());
  EXPECT_LE(needed, (1.0 - kRecommendedHeadroom) * static_cast<double>(gpu.usable()));
  EXPECT_NEAR(needed / kGiB, 52.7, 0.05) << "the figure in configs/llama8b.toml's header";
}

// "Fits" is judged on usable memory; the recommendation also keeps
// kRecommendedHeadroom of it spare. With the usable memory set so that the
// predicted fastest row needs 95% of it, that row fits but is passed over for
// the next fastest within the headroom.
TEST(Planner, RecommendationKeepsHeadroomAndFitsCountTheReserve) {
  const Config config = config_load("configs/scale_cpu.toml", {});
  const HardwareProfile cpu = hardware_load("cost_models/hardware/cpu_dev_vm.toml");
  const size_t fastest =
      plan_rank(plan_memory(config, 2, 2, 1 << 30, 8), 2, cpu).front().row.memory.total();
  const size_t usable = static_cast<size_t>(static_cast<double>(fastest) / 0.95);
  const std::vector<RankedPlanRow> ranked = plan_rank(plan_memory(config, 2, 2, usable, 8), 2, cpu);
  ASSERT_EQ(ranked.front().row.memory.total(), fastest);
  const RankedPlanRow* best = plan_recommend(ranked, usable);
  ASSERT_NE(best, nullptr);
  EXPECT_NE(best, &ranked.front());
  const double limit = (1.0 - kRecommendedHeadroom) * static_cast<double>(usable);
  EXPECT_LE(static_cast<double>(best->row.memory.total()), limit);
  for (const RankedPlanRow& r : ranked) {
    if (&r == best) break;
    EXPECT_GT(static_cast<double>(r.row.memory.total()), limit) << r.row.mode << " came first";
  }
  for (const RankedPlanRow& r : ranked) {
    EXPECT_EQ(r.row.fits, r.row.memory.total() <= usable) << r.row.mode;
  }
}

// What a row's command line runs is the row: loading the config with the
// row's overrides (validated, as `./train` does) gives every setting the row
// names and the memory it plans, from a base whose settings differ from the
// rows' (tensor parallel 2, an fp32 reduction, ZenFlow on): the overrides
// must reset them, not only add to them.
TEST(Planner, EveryRowsCommandLineLoadsAsTheRow) {
  const Config base = config_load("configs/llama8b.toml",
                                  {"parallel.tensor_parallel=2", "parallel.reduce_dtype=fp32",
                                   "zenflow.enabled=true", "offload.optimizer=cpu"});
  const std::vector<PlanRow> rows = plan_memory(base, 16, 8, h100_memory().usable(), 8);
  ASSERT_FALSE(rows.empty());
  for (const PlanRow& row : rows) {
    SCOPED_TRACE(fmt::format("T {} P {} {} {} {} {}", row.tensor_parallel, row.pipeline_parallel,
                             row.mode, row.recompute, row.precision, row.offload));
    const Config loaded = config_load(row.config.path, row.config.overrides);
    EXPECT_EQ(loaded.parallel.tensor_parallel, row.tensor_parallel);
    EXPECT_EQ(loaded.parallel.pipeline_parallel, row.pipeline_parallel);
    EXPECT_EQ(row.mode.starts_with(to_string(loaded.parallel.mode)), true);
    EXPECT_EQ(loaded.training.recompute, row.recompute);
    EXPECT_EQ(loaded.training.precision, row.precision);
    EXPECT_EQ(loaded.parallel.reduce_dtype, row.precision);
    EXPECT_EQ(loaded.offload.optimizer, row.offload);
    EXPECT_FALSE(loaded.zenflow.enabled);
    EXPECT_EQ(memory_plan(loaded, sharding_plan(loaded.parallel, row.data_parallel)).total(),
              row.memory.total());
  }
}

// Llama 3 8B on one 80 GB GPU: nothing fits with the optimizer on the
// device (its fp32 masters and moments alone are 90 GiB); with it offloaded
// the device keeps the bf16 copy, the gradients and the activations, and the
// host holds 18 bytes per parameter (fp32 masters, m, v, gradient landing,
// bf16 upload copy).
TEST(Planner, Llama8bOnOneGpuNeedsTheOptimizerOffloaded) {
  const Config config = llama8b();
  const MemoryBudget gpu = h100_memory();
  const std::vector<PlanRow> rows = plan_memory(config, 1, 0, gpu.usable(), 8);
  const double params = static_cast<double>(layout_build(config.model).total_numel);
  bool any_offload = false;
  for (const PlanRow& row : rows) {
    if (row.offload == OffloadTarget::none) {
      EXPECT_FALSE(row.fits) << row.mode << " " << to_string(row.recompute);
      EXPECT_EQ(row.memory.state.host, 0u);
      continue;
    }
    any_offload = true;
    EXPECT_EQ(row.precision, Precision::bf16);
    EXPECT_EQ(row.memory.state.optimizer, 0u);
    EXPECT_NEAR(static_cast<double>(row.memory.state.host) / params, 18.0, 0.01);
  }
  ASSERT_TRUE(any_offload);
}

// An fp8 config's 16-bit rows are fp8's: the same state as bf16 (gradients
// reduced in bf16), and the activations plus the FP8 copies of one block
// matmul (Transformer::activation_bytes' fp8_copies).
TEST(Planner, Fp8RowsCountTheFp8Copies) {
  Config bf16 = llama8b(), fp8 = llama8b();
  fp8.training.precision = Precision::fp8;
  const std::vector<PlanRow> bf16_rows = plan_memory(bf16, 16, 8, h100_memory().usable(), 8);
  const std::vector<PlanRow> fp8_rows = plan_memory(fp8, 16, 8, h100_memory().usable(), 8);
  ASSERT_EQ(bf16_rows.size(), fp8_rows.size());
  size_t compared = 0;
  for (size_t i = 0; i < fp8_rows.size(); ++i) {
    const PlanRow &a = bf16_rows[i], &b = fp8_rows[i];
    if (a.precision == Precision::fp32) continue;
    ASSERT_EQ(b.precision, Precision::fp8);
    EXPECT_EQ(b.config.parallel.reduce_dtype, Precision::bf16);
    EXPECT_EQ(b.memory.state.total(), a.memory.state.total());
    const TrainingConfig& t = b.config.training;
    const size_t copies = Transformer::activation_bytes(
                              b.config.model, t.micro_batch_size, t.seq_len, recompute_plan(t),
                              Precision::fp8, {0, b.tensor_parallel, 0, b.pipeline_parallel}, 1)
                              .fp8_copies;
    EXPECT_GT(copies, 0u);
    if (b.pipeline_parallel == 1) {
      EXPECT_EQ(b.memory.activations, a.memory.activations + copies);
    }
    ++compared;
  }
  EXPECT_GT(compared, 0u);
}

// Llama 3 70B on 64 ranks: P = 1, 2, 4, 8 each with T = 1, 2, 4, 8, every
// row's mesh the world, its bubble (P - 1) / (M + P - 1) with M = 512 / D
// micro-batches of one sequence per data-parallel rank.
TEST(Planner, PipelineRowsCoverEveryMeshWithItsBubble) {
  const Config config = config_load("configs/llama70b.toml", {});
  const std::vector<PlanRow> rows = plan_memory(config, 64, 8, 77 * kGiB, 8);
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
  const std::vector<std::string>& last = rows.back().config.overrides;
  EXPECT_NE(std::find(last.begin(), last.end(), "parallel.pipeline_parallel=8"), last.end());
  for (const std::string& o : rows.front().config.overrides)
    EXPECT_EQ(o.find("pipeline"), std::string::npos);
}

TEST(Planner, PipelineRowsNeedUntiedEmbeddingsAndABlockPerStage) {
  auto degrees = [](const Config& config, int world) {
    std::set<int> p;
    for (const PlanRow& row : plan_memory(config, world, 0, 77 * kGiB, 8))
      p.insert(row.pipeline_parallel);
    return p;
  };
  EXPECT_EQ(degrees(config_load("configs/llama70b.toml", {"model.tie_embeddings=true"}), 64),
            std::set<int>{1});
  // Two blocks: at most two stages; three ranks: no even split in two.
  const Config tiny = config_load("configs/tiny.toml", {"model.tie_embeddings=false"});
  EXPECT_EQ(degrees(tiny, 8), (std::set<int>{1, 2}));
  EXPECT_EQ(degrees(tiny, 3), std::set<int>{1});
  EXPECT_EQ(degrees(config_load("configs/tiny.toml", {}), 8), std::set<int>{1})
      << "tiny ties its head";
}

// Without sharding (ddp) a rank holds its stage's whole state: P stages of
// 80 blocks cut it by about P (the largest stage holds 80 / P blocks and the
// embedding or the head), so the rank's total falls at every step of P.
TEST(Planner, StatePerRankFallsWithPipelineStages) {
  const Config config = config_load("configs/llama70b.toml", {});
  size_t previous = 0;
  double ddp_params = 0;
  for (const PlanRow& row : plan_memory(config, 64, 8, 77 * kGiB, 8)) {
    if (row.tensor_parallel != 1 || row.mode != "ddp" || row.recompute != Recompute::full ||
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
