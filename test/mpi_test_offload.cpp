// CPU offload and ZenFlow under mpirun, on whatever world size mpirun gave:
//  - the offloaded optimizer (host worker thread, separate host buffers,
//    the same hand-offs as on a GPU) gives the same bits as the device's in
//    ddp, zero2, zero3 and hybrid, and holds the bytes the planner says;
//  - each gradient leaves for the host as soon as it is final: during the
//    last micro-batch's backward (zero2 / zero3, or a one-member group),
//    else when the reductions are waited for; never twice;
//  - a checkpoint saved with offload or ZenFlow resumes bit-identically (a
//    save is a settle point in both runs), and loads into a run without
//    offload, and back.
// ZenFlow's own tests are in mpi_test_zenflow.cpp and test_zenflow.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/transformer.h"
#include "parallel/comm.h"
#include "parallel/sharding_engine.h"
#include "parallel/topology.h"
#include "test/offload_runs.h"
#include "trainer/trainer.h"

namespace llm {
namespace {

using namespace offload_runs;

TEST(Offload, SameBitsAsTheDeviceOptimizerInEveryMode) {
  for (const auto& mode : modes_of(comm_world().size())) {
    for (const char* precision : {"fp32", "bf16"}) {
      SCOPED_TRACE(mode[0] + " " + precision);
      const std::vector<std::string> preset =
          with(mode, {std::string("training.precision=") + precision});
      const TrainedRun device = train(preset);
      const TrainedRun offloaded = train(with(preset, {"offload.optimizer=cpu"}));
      EXPECT_EQ(offloaded.losses, device.losses);
      ASSERT_EQ(offloaded.params.size(), device.params.size());
      EXPECT_EQ(
          0, std::memcmp(offloaded.params.data(), device.params.data(), device.params.size() * 4));
      // The planner's rows are the engine's own buffers (shard rank 0 holds
      // the largest slice; the others are padded to it).
      for (const TrainedRun* r : {&device, &offloaded}) {
        EXPECT_EQ(r->bytes.params, r->planned.params);
        EXPECT_EQ(r->bytes.grads, r->planned.grads);
        EXPECT_EQ(r->bytes.optimizer, r->planned.optimizer);
        EXPECT_EQ(r->bytes.buffers, r->planned.buffers);
        EXPECT_EQ(r->bytes.host, r->planned.host);
      }
      // What left the device: the moments, and in bf16 the fp32 masters too
      // (in fp32 the device keeps an fp32 compute copy of them).
      EXPECT_EQ(device.bytes.host, 0u);
      EXPECT_EQ(offloaded.bytes.optimizer, 0u);
      EXPECT_GT(offloaded.bytes.host, device.bytes.optimizer);
      if (std::string(precision) == "bf16") {
        EXPECT_LT(offloaded.bytes.params, device.bytes.params);
      } else {
        EXPECT_EQ(offloaded.bytes.params, device.bytes.params);  // fp32 masters -> fp32 copy
      }
    }
  }
}

// The engine driven by hand over two micro-batches, to see when the copies
// start: nothing leaves during the first micro-batch (its gradient is not
// final); during the last one's backward, without replicas, zero2 / zero3 /
// hybrid send every unit whose reduce-scatter finished there (all but the
// ones still reducing) and ddp every unit (its one-member all-reduce is a
// copy); an all-reduce across replicas finishes only when waited for, before
// the gradient norm. After the step every owned element came down exactly once.
TEST(Offload, GradientsLeaveForTheHostAsSoonAsTheyAreFinal) {
  Group& world = comm_world();
  const int B = 1, T = 32;
  for (const auto& mode : modes_of(world.size())) {
    SCOPED_TRACE(mode[0]);
    const Config config = make_config(with(mode, {"offload.optimizer=cpu"}));
    const std::unique_ptr<Transformer> model =
        Transformer::create(config.model, B, T, backend_cpu());
    Topology topology(world, config.parallel);
    ShardingEngine engine(model->layout(), config, backend_cpu(), topology);
    uint64_t owned_bytes = 0;
    for (const OwnedSlice& slice : engine.owned_slices())
      owned_bytes += slice.count * sizeof(float);
    ASSERT_GT(owned_bytes, 0u);
    std::vector<int32_t> inputs(B * T), targets(B * T);
    for (int i = 0; i < B * T; ++i) {
      inputs[i] = (i * 7 + world.rank()) % config.model.vocab_size;
      targets[i] = (i * 5 + 3) % config.model.vocab_size;
    }
    auto micro_batch = [&](bool last) {
      engine.begin_micro_batch(last);
      model->stage_forward(engine, 0, inputs.data(), targets.data(), B, T, 1.0f / (2 * B * T));
      model->stage_backward(engine, 0, B, T);
    };
    engine.zero_grads();
    micro_batch(false);
    EXPECT_EQ(engine.offload_stats().to_host_bytes, 0u) << "a gradient left before it was final";
    micro_batch(true);
    const OffloadStats backward = engine.offload_stats();
    EXPECT_EQ(backward.to_host_bytes, backward.to_host_early_bytes);
    const bool one_replica = topology.replicate->size() == 1;
    if (mode[0] == "parallel.mode=ddp") {
      EXPECT_EQ(backward.to_host_bytes, one_replica ? owned_bytes : 0u);
    } else if (one_replica) {  // zero2, zero3, hybrid of one group
      EXPECT_GT(backward.to_host_bytes, 0u) << "no copy started during the backward";
      EXPECT_LT(backward.to_host_bytes, owned_bytes);  // the last units are still reducing
    } else {
      EXPECT_EQ(backward.to_host_bytes, 0u) << "copied before the all-reduce was waited for";
    }
    const float norm = engine.grad_norm();
    EXPECT_EQ(engine.offload_stats().to_host_early_bytes, owned_bytes);
    engine.optimizer_step({1e-3f, clip_scale(norm, 1.0f), 1});
    const OffloadStats step = engine.offload_stats();
    EXPECT_EQ(step.to_host_bytes, owned_bytes) << "a gradient was copied twice";
    EXPECT_EQ(step.to_host_early_bytes, owned_bytes);
  }
}

// A one-step-stale update is a different trajectory, but the same run twice
// is the same bits; it leaves step 1 alone and changes what follows.
TEST(Offload, DelayedUpdateIsDeterministicAndStale) {
  const std::vector<std::string> delayed = {"parallel.mode=zero2", "offload.optimizer=cpu",
                                            "offload.delayed_update=true"};
  const TrainedRun a = train(delayed), b = train(delayed);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.params, b.params);
  const TrainedRun plain = train({"parallel.mode=zero2"});
  EXPECT_EQ(a.losses[0], plain.losses[0]);  // nothing is stale before the first update
  EXPECT_NE(a.losses[2], plain.losses[2]);  // step 3 sees step 1's parameters
}

// Resume is bit-identical to a run that saved at the same step (a save
// settles deferred work), and the checkpoint loads into a run without
// offload: its first step sees exactly the saved parameters.
TEST(OffloadCheckpoint, ResumesBitIdenticallyAndLoadsWithoutOffload) {
  Group& world = comm_world();
  constexpr int kSaveAt = 2, kTotal = 5;
  const std::vector<std::string> zenflow = {"zenflow.enabled=true", "zenflow.topk_ratio=0.25",
                                            "zenflow.update_interval=2",
                                            "zenflow.select_interval=2"};
  const std::vector<std::vector<std::string>> variants = {
      {"offload.optimizer=cpu", "offload.delayed_update=true"},
      with(zenflow, {"zenflow.overlap_step=true"}),
      with(zenflow, {"zenflow.overlap_step=false", "zenflow.full_warm_up_rounds=1"})};
  for (const auto& mode : modes_of(world.size())) {
    for (size_t v = 0; v < variants.size(); ++v) {
      const std::vector<std::string> preset = with(mode, variants[v]);
      SCOPED_TRACE(mode[0] + " " + variants[v][0] + " variant " + std::to_string(v));
      const std::string dir = shared_dir(world, "resume");
      TrainedRun whole;
      {
        Trainer straight(make_config(preset, dir + "/straight"), world);
        whole = train(straight, kTotal, kSaveAt);
      }
      Trainer resumed(make_config(preset, dir + "/straight", dir + "/straight/step_2"), world);
      ASSERT_EQ(resumed.start_step(), kSaveAt);
      const TrainedRun rest = train(resumed, kTotal);
      for (int s = kSaveAt; s < kTotal; ++s)
        EXPECT_EQ(rest.losses[s - kSaveAt], whole.losses[s]) << s;
      EXPECT_EQ(rest.params, whole.params);

      // Into the device optimizer, and from there back into this one.
      Trainer plain(make_config(mode, dir + "/plain", dir + "/straight/step_2"), world);
      const TrainedRun plain_run = train(plain, kSaveAt + 2, kSaveAt + 1);
      EXPECT_EQ(plain_run.losses[0], whole.losses[kSaveAt]) << "the saved parameters, as loaded";
      Trainer back(make_config(preset, dir + "/back", dir + "/plain/step_3"), world);
      const TrainedRun back_run = train(back, kSaveAt + 2);
      EXPECT_EQ(back_run.losses[0], plain_run.losses[1]);
    }
  }
}

}  // namespace
}  // namespace llm
