// Document masking under mpirun: the tiny model on data/tiny (documents of
// ~200 tokens packed into sequences of 128, so most sequences hold a
// boundary) with data.document_masking on, in zero3 over the world, tensor
// parallel 2 and pipeline parallel 2 (each with data parallelism over the
// rest), against the single process with the same mask: every step's loss
// and gradient norm and every parameter after 3 steps within the data-
// parallel tests' fp32 tolerance (an untied head, as pipeline stages need).
// The mask moves the single process's losses and parameters by more than ten
// times that tolerance, so the comparison is not one of unmasked runs.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm.h"
#include "test/mpi_runs.h"
#include "trainer/trainer.h"

namespace llm {
namespace {

constexpr int kSteps = 3;

RunResult train(Group& group, std::vector<std::string> overrides) {
  std::vector<std::string> all = comparison_overrides(mpi_temp_dir("documents", "runs"));
  all.push_back("training.seq_len=128");
  all.push_back("model.tie_embeddings=false");  // pipeline stages hold the embedding and head apart
  all.insert(all.end(), overrides.begin(), overrides.end());
  return run_steps(group, config_load("configs/tiny.toml", all), kSteps);
}

const RunResult& single_process(bool masked) {
  static std::unique_ptr<RunResult> runs[2];
  if (!runs[masked]) {
    std::unique_ptr<Group> alone = comm_world().split(comm_world().rank(), 0);
    runs[masked] = std::make_unique<RunResult>(
        train(*alone, {"data.document_masking=" + std::string(masked ? "true" : "false")}));
  }
  return *runs[masked];
}

void expect_matches_single_process(std::vector<std::string> mesh) {
  mesh.push_back("data.document_masking=true");
  expect_same_curve(train(comm_world(), mesh), single_process(true), kCurveTolerance);
}

TEST(DocumentMasking, TheMaskChangesTheSingleProcessRun) {
  const RunResult &masked = single_process(true), &plain = single_process(false);
  EXPECT_GT(max_abs_difference(masked.losses, plain.losses), 10 * kCurveTolerance);
  EXPECT_GT(max_abs_difference(masked.params, plain.params), 10 * kCurveTolerance);
}

TEST(DocumentMasking, Zero3MatchesTheSingleProcess) {
  expect_matches_single_process({"parallel.mode=zero3"});
}

TEST(DocumentMasking, TensorParallelMatchesTheSingleProcess) {
  if (comm_world().size() % 2 != 0) GTEST_SKIP() << "tensor_parallel = 2 needs an even world";
  expect_matches_single_process({"parallel.tensor_parallel=2"});
}

TEST(DocumentMasking, PipelineParallelMatchesTheSingleProcess) {
  if (comm_world().size() % 2 != 0) GTEST_SKIP() << "pipeline_parallel = 2 needs an even world";
  expect_matches_single_process({"parallel.pipeline_parallel=2"});
}

}  // namespace
}  // namespace llm
