// ZenFlow under mpirun, on whatever world size mpirun gave:
//  - with every column chosen every step it is AdamW, bit for bit;
//  - its choice moves per-column norms across ranks, never gradients.
// Its checkpoints are tested with the offloaded optimizer's
// (mpi_test_offload.cpp), and its semantics over sharded gradients with the
// other modes' (mpi_test_training_step.cpp); single-process: test_zenflow.cpp.
#include <gtest/gtest.h>

#include "collectives/group.h"
#include "test/offload_runs.h"

namespace llm {
namespace {

using namespace offload_runs;

// Every column chosen, a host update every step, no warm-up: each element
// gets AdamW(g_t) at step t on the device. The compact copy runs the same
// AdamW kernel on the same values, so the bits match.
TEST(ZenFlow, AllColumnsEveryStepIsAdamW) {
  for (const char* mode : {"parallel.mode=ddp", "parallel.mode=zero3"}) {
    SCOPED_TRACE(mode);
    const TrainedRun adamw = train({mode});
    const TrainedRun zenflow =
        train({mode, "zenflow.enabled=true", "zenflow.topk_ratio=1.0", "zenflow.update_interval=1",
               "zenflow.full_warm_up_rounds=0"});
    EXPECT_EQ(zenflow.losses, adamw.losses);
    EXPECT_EQ(zenflow.params, adamw.params);
  }
}

// The choice all-reduces one float per matrix column over the shard group;
// the gradients themselves only move as the mode's reduce-scatter.
TEST(ZenFlow, OnlyColumnNormsCrossRanksForTheChoice) {
  Group& world = comm_world();
  const Config config = make_config({"parallel.mode=zero2", "zenflow.enabled=true",
                                     "zenflow.topk_ratio=0.1", "zenflow.update_interval=2"});
  Trainer trainer(config, world);
  trainer.topology().shard->reset_stats();
  for (int s = 0; s < kSteps; ++s) trainer.train_step(s);
  const ZenFlowStats& zf = *trainer.engine().zenflow_stats();
  const CommStats& comm = trainer.topology().shard->stats();
  size_t columns = 0;
  for (const TensorSpec& t : trainer.model().layout().tensors)
    columns += t.shape.size() >= 2 ? t.shape.back() : 0;
  EXPECT_EQ(zf.selections, static_cast<uint64_t>(kSteps / 2));  // at each interval's start
  EXPECT_EQ(zf.host_updates, static_cast<uint64_t>(kSteps / 2));
  if (world.size() == 1) {
    EXPECT_EQ(zf.selection_bytes, 0u);
    return;
  }
  EXPECT_EQ(zf.selection_bytes, zf.selections * columns * sizeof(float));
  // zero2 issues no other all-reduce in its shard group (scalars are not counted).
  EXPECT_EQ(comm.all_reduce_sent,
            all_reduce_traffic(columns * sizeof(float), world.size()).sent * zf.selections);
  const uint64_t gradient_bytes = kSteps * trainer.model().layout().total_numel * sizeof(float);
  EXPECT_LT(zf.selection_bytes * 100, gradient_bytes) << "selection traffic is not light";
}

}  // namespace
}  // namespace llm
