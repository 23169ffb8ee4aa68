// The runs the offload and ZenFlow tests under mpirun compare: the tiny
// config with twelve sequences a step of one each, trained for kSteps on
// every rank of the world, with its losses, gathered parameters and bytes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "parallel/comm.h"
#include "parallel/sharding_engine.h"
#include "trainer/trainer.h"

namespace llm::offload_runs {

namespace fs = std::filesystem;

inline constexpr int kSteps = 4;

inline std::string shared_dir(Group& world, const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("llm_mpi_offload_np" + std::to_string(world.size()) + "_" + name);
  if (world.rank() == 0) fs::remove_all(dir);
  world.barrier();
  return dir.string();
}

inline Config make_config(const std::vector<std::string>& extra, const std::string& run_dir = "",
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
inline TrainedRun train(Trainer& trainer, int until, int save_at = 0) {
  TrainedRun r;
  for (int s = trainer.start_step(); s < until; ++s) {
    r.losses.push_back(trainer.train_step(s).loss);
    if (s + 1 == save_at) trainer.save_checkpoint(save_at);
  }
  r.params = trainer.engine().gather_all_params();
  r.bytes = trainer.engine().bytes();
  return r;
}

inline TrainedRun train(const std::vector<std::string>& extra) {
  const Config config = make_config(extra);
  Trainer trainer(config, comm_world());
  TrainedRun r = train(trainer, kSteps);
  r.planned =
      ShardingEngine::planned_bytes(trainer.model().layout(), trainer.topology().plan, config);
  return r;
}

inline std::vector<std::vector<std::string>> modes_of(int world) {
  std::vector<std::vector<std::string>> modes = {
      {"parallel.mode=ddp"}, {"parallel.mode=zero2"}, {"parallel.mode=zero3"}};
  if (world % 2 == 0) modes.push_back({"parallel.mode=hybrid", "parallel.shard_group_size=2"});
  return modes;
}

inline std::vector<std::string> with(std::vector<std::string> a,
                                     const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace llm::offload_runs
