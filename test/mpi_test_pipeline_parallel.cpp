// Pipeline parallelism under mpirun, against the single-process run with the
// same global batch: per-step losses, gradient norms and the whole model's
// parameters after a few steps, for P stages alone (uneven when P does not
// divide the blocks), with tensor parallelism (T = 2, P = 2) and with data
// parallelism (P = 2 over D = 2: ddp, zero1, zero3, hybrid); 1F1B and GPipe
// give the same bits; evaluation runs through the stages; checkpoints saved
// at (T, P) = (2, 2) resume bit-identically and load into zero3 over four
// ranks and into a single process; Hugging Face weights load into every stage
// and tensor slice; fp8 with its fused amaxes gives the unfused bits. Each
// test names the world it needs and skips elsewhere, saying so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "interop/hf_llama.h"
#include "parallel/comm.h"
#include "parallel/topology.h"
#include "test/fp8_counting_backend.h"
#include "test/mpi_runs.h"
#include "trainer/trainer.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 4;

// Both untied (a tied LM head cannot be pipelined). tiny: 4 blocks, so 3
// stages split them 2 + 1 + 1. ragged: 3 blocks, 40 wide, 4 heads over 2 kv
// heads, ffn 100.
std::vector<std::string> base_overrides(const std::string& model, const std::string& run_dir) {
  std::vector<std::string> o = comparison_overrides(run_dir);
  o.push_back("model.tie_embeddings=false");
  if (model == "tiny") o.push_back("model.n_layers=4");
  if (model == "ragged") {
    o.push_back("model.n_layers=3");
    for (const std::string& kv : ragged_model_overrides(2)) o.push_back(kv);
  }
  return o;
}

Config make_config(const std::string& model, const std::string& run_dir,
                   const std::vector<std::string>& overrides) {
  std::vector<std::string> all = base_overrides(model, run_dir);
  all.insert(all.end(), overrides.begin(), overrides.end());
  return config_load("configs/tiny.toml", all);
}

RunResult train(Group& world, const std::string& model, const std::vector<std::string>& overrides) {
  return run_steps(world, make_config(model, mpi_temp_dir("pp", "runs"), overrides), kSteps);
}

const RunResult& reference(const std::string& model) {
  static std::map<std::string, RunResult> cache;
  if (!cache.count(model)) {
    std::unique_ptr<Group> alone = comm_world().split(comm_world().rank(), 0);
    cache[model] = train(*alone, model, {});
  }
  return cache.at(model);
}

void expect_matches_reference(const std::string& model, const std::vector<std::string>& mesh) {
  const RunResult& ref = reference(model);
  expect_same_curve(train(comm_world(), model, mesh), ref, kCurveTolerance);
}

std::string stages(int p) { return "parallel.pipeline_parallel=" + std::to_string(p); }

#define REQUIRE_WORLD(n)                                  \
  if (comm_world().size() != (n))                         \
  GTEST_SKIP() << "this mesh needs " << (n) << " ranks, " \
               << "this world has " << comm_world().size()

// Placement: a stage is a block of T x D consecutive ranks; the pipeline
// group links the ranks with the same (t, d) in stage order; one copy of the
// model state spans every stage.
TEST(PipelineParallelMesh, StagesAreBlocksOfConsecutiveRanks) {
  REQUIRE_WORLD(4);
  Group& world = comm_world();
  ParallelConfig config;
  config.mode = ParallelMode::zero3;
  config.pipeline_parallel = 2;
  Topology topology(world, config);  // T = 1, P = 2, D = 2
  EXPECT_EQ(topology.pipeline->size(), 2);
  EXPECT_EQ(topology.pipeline->rank(), world.rank() / 2);
  EXPECT_EQ(topology.dp_size(), 2);
  EXPECT_EQ(topology.dp_rank(), world.rank() % 2);
  EXPECT_EQ(topology.model_copy->size(), 4);
  EXPECT_EQ(topology.model_parallel->size(), 2);
  EXPECT_EQ(topology.checkpoint_writers(), (std::vector<int>{0, 1, 2, 3}));
  config.mode = ParallelMode::ddp;
  Topology replicated(world, config);
  EXPECT_EQ(replicated.checkpoint_writers(), (std::vector<int>{0, 2}));
  EXPECT_EQ(replicated.checkpoint_writer(), world.rank() % 2 == 0);
}

class PipelineParallel : public ::testing::TestWithParam<std::string> {};

// (1, P, 1) with P = the world: 2 even stages, 3 stages of 2 + 1 + 1 blocks
// (tiny) or 1 + 1 + 1 (ragged).
TEST_P(PipelineParallel, StagesMatchSingleProcess) {
  const int world = comm_world().size();
  const int blocks = GetParam() == "tiny" ? 4 : 3;
  if (world < 2 || world > 3) GTEST_SKIP() << "stage-only meshes run on 2 and 3 ranks";
  ASSERT_LE(world, blocks);
  expect_matches_reference(GetParam(), {stages(world)});
}

// (2, 2, 1): tensor parallelism inside each stage.
TEST_P(PipelineParallel, WithTensorParallelMatchesSingleProcess) {
  REQUIRE_WORLD(4);
  expect_matches_reference(GetParam(), {stages(2), "parallel.tensor_parallel=2"});
}

// (1, 2, 2): every data-parallel mode over the two ranks of each stage.
TEST_P(PipelineParallel, WithDataParallelModesMatchesSingleProcess) {
  REQUIRE_WORLD(4);
  for (std::vector<std::string> mode : {std::vector<std::string>{"parallel.mode=ddp"},
                                        {"parallel.mode=zero1"},
                                        {"parallel.mode=zero3"},
                                        {"parallel.mode=hybrid", "parallel.shard_group_size=1"}}) {
    SCOPED_TRACE(mode[0]);
    mode.push_back(stages(2));
    expect_matches_reference(GetParam(), mode);
  }
}

// (2, 2, 2): all three dimensions, zero3 and hybrid (shard groups of 2 over
// D = 2 is zero3's sharding; replication across them needs D = 4: (1, 2, 4)).
TEST_P(PipelineParallel, ThreeDimensionalMeshMatchesSingleProcess) {
  REQUIRE_WORLD(8);
  for (std::vector<std::string> mesh :
       {std::vector<std::string>{"parallel.tensor_parallel=2", "parallel.mode=zero3"},
        {"parallel.tensor_parallel=2", "parallel.mode=ddp"},
        {"parallel.mode=hybrid", "parallel.shard_group_size=2"}}) {
    SCOPED_TRACE(mesh[0] + " " + mesh[1]);
    mesh.push_back(stages(2));
    expect_matches_reference(GetParam(), mesh);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyAndRagged, PipelineParallel, ::testing::Values("tiny", "ragged"));

// Both schedules run each stage's backward passes in micro-batch order, so
// every gradient accumulates in the same order: the same bits, also with
// recomputation and bf16. GPipe holds every micro-batch, 1F1B at most P.
TEST(PipelineSchedules, OneFOneBAndGPipeGiveTheSameBits) {
  const int world = comm_world().size();
  if (world < 2) GTEST_SKIP() << "needs 2 or more ranks";
  const int p = std::min(world, 4);
  const std::string dp = world % p == 0 ? "parallel.mode=zero3" : "parallel.mode=ddp";
  if (world % p != 0) GTEST_SKIP() << p << " stages do not divide " << world << " ranks";
  for (std::vector<std::string> extra :
       {std::vector<std::string>{}, {"training.recompute=full"}, {"training.precision=bf16"}}) {
    SCOPED_TRACE(extra.empty() ? "plain" : extra[0]);
    extra.push_back(stages(p));
    extra.push_back(dp);
    std::vector<std::string> gpipe = extra;
    gpipe.push_back("parallel.pipeline_schedule=gpipe");
    RunResult a = train(comm_world(), "tiny", extra), b = train(comm_world(), "tiny", gpipe);
    EXPECT_EQ(a.losses, b.losses);
    EXPECT_EQ(a.grad_norms, b.grad_norms);
    ASSERT_EQ(a.params.size(), b.params.size());
    EXPECT_EQ(0, std::memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)));
  }
}

// In-flight activations: stage s of P holds min(P - s, M) micro-batches
// under 1F1B and all M under GPipe, and the memory plan is the largest
// stage's; evaluation and generation run through the stages.
TEST(PipelineSchedules, ActivationSlotsEvaluationAndSampling) {
  REQUIRE_WORLD(2);
  Config one_f_one_b =
      make_config("tiny", mpi_temp_dir("pp", "runs"),
                  {stages(2), "training.eval_sequences=4", "training.sample_tokens=4"});
  Config gpipe = one_f_one_b;
  gpipe.parallel.pipeline_schedule = PipelineSchedule::gpipe;
  Trainer a(one_f_one_b, comm_world()), b(gpipe, comm_world());
  const int stage = a.topology().pipeline->rank(), M = a.accumulation_steps();
  EXPECT_EQ(M, 12);
  EXPECT_EQ(a.model().split().in_flight, 2 - stage);
  EXPECT_EQ(b.model().split().in_flight, M);
  EXPECT_GT(b.model().activation_bytes().total, a.model().activation_bytes().total);
  const size_t mine = a.engine().bytes().total() + a.model().activation_bytes().total;
  const double largest = comm_world().all_reduce_sum(stage == 0 ? static_cast<double>(mine) : 0);
  EXPECT_EQ(memory_plan(one_f_one_b, a.topology().plan).total(), static_cast<size_t>(largest))
      << "stage 0 holds the embedding and two micro-batches: the largest";

  std::unique_ptr<Group> alone = comm_world().split(comm_world().rank(), 0);
  Config single = make_config("tiny", mpi_temp_dir("pp", "runs"),
                              {"training.eval_sequences=4", "training.sample_tokens=4"});
  Trainer reference_run(single, *alone);
  EXPECT_NEAR(a.evaluate(), reference_run.evaluate(), 1e-6f);
  EXPECT_EQ(a.sample(4), reference_run.sample(4)) << "the same tokens on every stage";
}

// precision fp8, its amaxes fused into their producers (the forward's
// inputs' and the backward's output gradients') and the backward's input
// scales kept from the forward, gives the bits of the unfused amax passes
// where the fusion steps back: at a stage boundary (the gradient the next
// stage sends has no row amaxes), with recomputation, and under tensor
// parallelism (the residual stream's gradient all-gathered without them).
TEST(PipelineParallelFp8, FusedAmaxGivesTheUnfusedBits) {
  REQUIRE_WORLD(2);
  for (std::vector<std::string> mesh : {std::vector<std::string>{stages(2)},
                                        {stages(2), "training.recompute=full"},
                                        {"parallel.tensor_parallel=2"}}) {
    SCOPED_TRACE(mesh.back());
    mesh.push_back("training.precision=fp8");
    const Config config = make_config("tiny", mpi_temp_dir("pp", "runs"), mesh);
    auto run = [&](bool fused) {
      return run_steps(comm_world(), config, 2,
                       [&](Trainer& t) { t.model().set_fp8_fused_amax(fused); });
    };
    const RunResult fused = run(true), unfused = run(false);
    EXPECT_EQ(fused.losses, unfused.losses);
    EXPECT_EQ(fused.grad_norms, unfused.grad_norms);
    ASSERT_EQ(fused.params.size(), unfused.params.size());
    EXPECT_EQ(0, std::memcmp(fused.params.data(), unfused.params.data(),
                             fused.params.size() * sizeof(float)));
  }
}

// Where the fusion steps back, counted per rank and micro-batch: the scales
// made from row amaxes, 6 per block on one rank (3 forward inputs, 3
// backward output gradients: test_fp8_fused_amax.cpp), less one on the first
// of two stages (its last block's w2 gets the next stage's gradient, which
// comes without amaxes), 2 per block under tensor parallelism (SwiGLU's,
// forward and backward; the norms' rows are split across the ranks).
TEST(PipelineParallelFp8, RowAmaxesWhereTheRowsAreWhole) {
  REQUIRE_WORLD(2);
  const Backend backend = test_support::fp8_counting_backend();
  const int rank = comm_world().rank();
  struct Mesh {
    std::string key;
    int row_amax_scales;  // per micro-batch on this rank
  };
  for (const Mesh& mesh : {Mesh{stages(2), rank == 0 ? 2 * 6 - 1 : 2 * 6},
                           Mesh{"parallel.tensor_parallel=2", 4 * 2}}) {
    SCOPED_TRACE(mesh.key);
    Trainer trainer(
        make_config("tiny", mpi_temp_dir("pp", "runs"), {mesh.key, "training.precision=fp8"}),
        comm_world(), &backend);
    test_support::fp8_scale_counts = {};
    trainer.train_step(0);
    EXPECT_EQ(test_support::fp8_scale_counts.row_amax_scales,
              mesh.row_amax_scales * trainer.accumulation_steps());
  }
}

// Checkpoints: saved at (T, P, D) = (2, 2, 1), a resume at the same mesh
// continues bit-identically; the checkpoint loads into zero3 over four ranks
// (1, 1, 4) and into a single process, continuing the same curve.
TEST(PipelineParallelCheckpoint, ResumesExactlyAndLoadsIntoOtherMeshes) {
  REQUIRE_WORLD(4);
  Group& world = comm_world();
  constexpr int kSaveAt = 2;
  const std::string dir = mpi_temp_dir("pp", "ckpt");
  if (world.rank() == 0) fs::remove_all(dir);
  world.barrier();
  const std::vector<std::string> mesh = {stages(2), "parallel.tensor_parallel=2"};
  auto config = [&](const std::string& resume, std::vector<std::string> mode) {
    mode.push_back("checkpoint.resume=" + resume);
    return make_config("ragged", dir + "/split", mode);
  };
  RunResult straight = train(world, "ragged", mesh);
  std::string saved;
  {
    Trainer first(config("none", mesh), world);
    for (int s = 0; s < kSaveAt; ++s) first.train_step(s);
    saved = first.save_checkpoint(kSaveAt);
  }
  const RunResult resumed = resume_steps(world, config(saved, mesh), kSaveAt, kSteps);
  {
    SCOPED_TRACE("resumed at the same mesh");
    expect_continues(resumed, straight, kSaveAt, 0);
  }
  for (bool single : {true, false}) {
    SCOPED_TRACE(single ? "loaded into one process" : "loaded into zero3 over 4 ranks");
    std::unique_ptr<Group> alone = world.split(world.rank(), 0);
    expect_continues(resume_steps(single ? *alone : world, config(saved, {"parallel.mode=zero3"}),
                                  kSaveAt, kSteps),
                     straight, kSaveAt, kCurveTolerance);
  }
}

// model.init_from: every stage (and every tensor slice) reads its part of the
// whole model's Hugging Face tensors, so the assembled parameters are the
// exported ones, bit for bit.
TEST(PipelineParallelHuggingFace, InitFromFillsEveryStageAndSlice) {
  REQUIRE_WORLD(2);
  Group& world = comm_world();
  const std::string dir = mpi_temp_dir("pp", "hf");
  std::unique_ptr<Group> alone = world.split(world.rank(), 0);
  Config trained = make_config("tiny", mpi_temp_dir("pp", "runs"), {});
  std::vector<float> exported;
  {
    Trainer single(trained, *alone);
    single.train_step(0);  // weights unlike any initialization
    exported = single.engine().gather_all_params();
  }
  if (world.rank() == 0)
    hf_export(trained.model, layout_build(trained.model), exported.data(), dir, {});
  world.barrier();
  for (const std::string& mesh : {stages(2), std::string("parallel.tensor_parallel=2")}) {
    SCOPED_TRACE(mesh);
    Trainer loaded(
        make_config("tiny", mpi_temp_dir("pp", "runs"), {mesh, "model.init_from=" + dir}), world);
    const std::vector<float> params = loaded.engine().gather_all_params();
    ASSERT_EQ(params.size(), exported.size());
    EXPECT_EQ(0, std::memcmp(params.data(), exported.data(), params.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace llm
