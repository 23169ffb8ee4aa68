// The CUDA backend on a group of ranks against its own single-rank run with
// the same global batch: every data-parallel mode and the tensor x pipeline
// mesh (TP2, PP2, TP2 x PP2, TP2 x zero3 x D), in fp32 and bf16, over NCCL
// and over the host-staged group (parallel.comm = mpi). make test runs it on
// the emulated backend, where the same mesh on the CPU backend is a second
// reference; the device script runs it over real NCCL with several ranks on
// one GPU (tools/one_gpu_ranks.sh). Rows the world size cannot hold skip,
// saying so; without a CUDA device, or where NCCL cannot place the ranks,
// the whole suite skips with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "parallel/comm.h"
#include "parallel/nccl_placement.h"
#include "device/device.h"
#include "test/mpi_runs.h"

namespace llm {
namespace {

constexpr int kSteps = 4;

struct Variant {
  std::string comm, precision;
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.comm << ", " << v.precision; }

// A row of the matrix: its name and the overrides that make it.
struct Row {
  std::string name;
  std::vector<std::string> overrides;
  int ranks_per_replica = 1;  // the world must be a multiple (T x P, or T x D for D = 2)
};

// Untied and 4 blocks for every row, so that the pipelined rows (a tied LM
// head cannot be pipelined) share the reference with the others.
RunResult train(Group& world, const Variant& v, const std::string& device,
                const std::vector<std::string>& row) {
  std::vector<std::string> all = comparison_overrides(mpi_temp_dir("gpu_matrix", "runs"));
  for (const std::string& o :
       {std::string("model.tie_embeddings=false"), std::string("model.n_layers=4"),
        "training.precision=" + v.precision, "training.device=" + device,
        "parallel.comm=" + (device == "cuda" ? v.comm : std::string("mpi"))})
    all.push_back(o);
  all.insert(all.end(), row.begin(), row.end());
  return run_steps(world, config_load("configs/tiny.toml", all), kSteps);
}

const RunResult& single_rank_run(const Variant& v) {
  static std::map<std::string, RunResult> cache;
  const std::string key = v.comm + v.precision;
  if (!cache.count(key)) {
    std::unique_ptr<Group> alone = comm_world().split(comm_world().rank(), 0);
    cache[key] = train(*alone, v, "cuda", {});
  }
  return cache.at(key);
}

// fp32: kCurveTolerance (mpi_runs.h). bf16: the same bf16 roundings as the
// single rank, only the fp32 gradient sums reordered, so losses within 1e-4
// (as test/mpi_test_modes.cpp); under tensor parallelism a row-parallel
// matmul's partial sums are reduced in bf16, one rounding more, so 2e-3
// (bf16 resolution, as test/mpi_test_tensor_parallel.cpp).
void expect_matches(const RunResult& run, const RunResult& reference, const Variant& v,
                    const Row& row) {
  if (v.precision == "fp32") return expect_same_curve(run, reference, kCurveTolerance);
  const bool tensor_parallel =
      std::count(row.overrides.begin(), row.overrides.end(), "parallel.tensor_parallel=2") > 0;
  const float tolerance = tensor_parallel ? 2e-3f : 1e-4f;
  ASSERT_EQ(run.losses.size(), reference.losses.size());
  for (size_t s = 0; s < run.losses.size(); ++s)
    EXPECT_NEAR(run.losses[s], reference.losses[s], tolerance) << "step " << s + 1;
}

std::vector<Row> rows(int world) {
  const std::string hybrid_group = std::to_string(world >= 4 && world % 2 == 0 ? world / 2 : 1);
  return {
      {"ddp", {"parallel.mode=ddp"}},
      {"zero1", {"parallel.mode=zero1"}},
      {"zero2", {"parallel.mode=zero2"}},
      {"zero3", {"parallel.mode=zero3"}},
      {"hybrid", {"parallel.mode=hybrid", "parallel.shard_group_size=" + hybrid_group}},
      {"TP2", {"parallel.tensor_parallel=2"}, 2},
      {"PP2", {"parallel.pipeline_parallel=2"}, 2},
      {"TP2xPP2", {"parallel.tensor_parallel=2", "parallel.pipeline_parallel=2"}, 4},
      {"TP2xzero3", {"parallel.tensor_parallel=2", "parallel.mode=zero3"}, 4},
  };
}

class GpuMatrix : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0)
      GTEST_SKIP() << (kBuiltWithCuda ? "no CUDA device on this machine"
                                      : "this build has no CUDA backend (no nvcc)");
    if (GetParam().comm == "nccl") {
      const NcclPlacement placement = nccl_placement(cuda_device_count());
      if (!placement.admitted) GTEST_SKIP() << placement.reason;
    }
  }
  // Runs every row of `names` the world can hold against the single rank.
  void run_rows(const std::vector<std::string>& names) {
    const Variant& v = GetParam();
    const int world = comm_world().size();
    for (const Row& row : rows(world)) {
      if (std::find(names.begin(), names.end(), row.name) == names.end()) continue;
      if (world % row.ranks_per_replica != 0) {
        if (comm_world().rank() == 0)
          std::printf("[ SKIPPED  ] %s: needs a multiple of %d ranks, this world has %d\n",
                      row.name.c_str(), row.ranks_per_replica, world);
        continue;
      }
      SCOPED_TRACE(row.name + ", " + v.comm + ", " + v.precision);
      const RunResult run = train(comm_world(), v, "cuda", row.overrides);
      expect_matches(run, single_rank_run(v), v, row);
      // The emulated CUDA mesh also follows the same mesh on the CPU backend.
      if (kCudaEmulated && v.precision == "fp32")
        expect_same_curve(run, train(comm_world(), v, "cpu", row.overrides), kCurveTolerance);
    }
  }
};

TEST_P(GpuMatrix, DataParallelModes) { run_rows({"ddp", "zero1", "zero2", "zero3", "hybrid"}); }

TEST_P(GpuMatrix, TensorAndPipelineMesh) { run_rows({"TP2", "PP2", "TP2xPP2", "TP2xzero3"}); }

INSTANTIATE_TEST_SUITE_P(CommAndPrecision, GpuMatrix,
                         ::testing::Values(Variant{"nccl", "fp32"}, Variant{"nccl", "bf16"},
                                           Variant{"mpi", "fp32"}, Variant{"mpi", "bf16"}),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return info.param.comm + "_" + info.param.precision;
                         });

}  // namespace
}  // namespace llm
