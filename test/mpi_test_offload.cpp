// CPU offload and ZenFlow under mpirun, on whatever world size mpirun gave:
//  - the offloaded optimizer (host worker thread, separate host buffers,
//    the same hand-offs as on a GPU) gives the same bits as the device's in
//    ddp, zero2, zero3 and hybrid, and holds the bytes the planner says;
//  - each gradient leaves for the host as soon as it is final: during the
//    last micro-batch's backward (zero2 / zero3, or a one-member group),
//    else when the reductions are waited for; never twice;
//  - ZenFlow with every column chosen every step is AdamW;
//  - ZenFlow's choice moves per-column norms across ranks, never gradients;
//  - a checkpoint saved with offload or ZenFlow resumes bit-identically (a
//    save is a settle point in both runs), and loads into a run without
//    offload, and back.
// ZenFlow against its written semantics, parameter by parameter, is in
// mpi_test_training_step.cpp / test_training_step.cpp.
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
#include "trainer/trainer.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 4;

std::string shared_dir(Group& world, const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("llm_mpi_offload_np" + std::to_string(world.size()) + "_" + name);
  if (world.rank() == 0) fs::remove_all(dir);
  world.barrier();
  return dir.string();
}

Config make_config(const std::vector<std::string>& extra, const std::string& run_dir = "",
                   const std::string& resume = "none") {
  std::vector<std::string> o = {
      "training.batch_size=12",
      "training.micro_batch_size=1",
      "training.warmup_steps=2",
      "training.lr=1e-3",
      "logging.metrics=false",
      "checkpoint.resume=" + resume,
      "checkpoint.dir=" +
          (run_dir.empty() ? (fs::temp_directory_path() / "llm_mpi_offload").string() : run_dir)};
  o.insert(o.end(), extra.begin(), extra.end());
  return config_load("configs/tiny.toml", o);
}

struct TrainedRun {
  std::vector<float> losses;
  std::vector<float> params;
  StateBytes bytes, planned;
};

// Trains steps [trainer.start_step(), until), saving after step `save_at` (0: never).
TrainedRun train(Trainer& trainer, int until, int save_at = 0) {
  TrainedRun r;
  for (int s = trainer.start_step(); s < until; ++s) {
    r.losses.push_back(trainer.train_step(s).loss);
    if (s + 1 == save_at) trainer.save_checkpoint(save_at);
  }
  r.params = trainer.engine().gather_all_params();
  r.bytes = trainer.engine().bytes();
  return r;
}

TrainedRun train(const std::vector<std::string>& extra) {
  const Config config = make_config(extra);
  Trainer trainer(config, comm_world());
  TrainedRun r = train(trainer, kSteps);
  r.planned =
      ShardingEngine::planned_bytes(trainer.model().layout(), trainer.topology().plan, config);
  return r;
}

std::vector<std::vector<std::string>> modes_of(int world) {
  std::vector<std::vector<std::string>> modes = {
      {"parallel.mode=ddp"}, {"parallel.mode=zero2"}, {"parallel.mode=zero3"}};
  if (world % 2 == 0) modes.push_back({"parallel.mode=hybrid", "parallel.shard_group_size=2"});
  return modes;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

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
    Transformer model(config.model, B, T, backend_cpu());
    Topology topology(world, config.parallel);
    ShardingEngine engine(model.layout(), config, backend_cpu(), topology);
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
      model.stage_forward(engine, 0, inputs.data(), targets.data(), B, T, 1.0f / (2 * B * T));
      model.stage_backward(engine, 0, B, T);
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
