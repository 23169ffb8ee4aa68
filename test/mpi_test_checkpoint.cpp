// Checkpoints under mpirun: an interrupted-and-resumed run is bit-identical to
// an uninterrupted one in every mode; a checkpoint saved by any mode on this
// world loads into every mode here and into a world of one (and back), and
// training continues on the single-process curve within fp32 tolerance.
// Saves written in the background (checkpoint.async) are invisible to the
// math and write what a blocking save writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "trainer/trainer.h"
#include "parallel/comm.h"
#include "test/mpi_runs.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

constexpr int kSaveAt = 3, kSteps = 6;
constexpr float kLossTolerance = 2e-5f, kParamTolerance = 2e-5f;  // as in mpi_test_modes.cpp

// Every mode; hybrid as real groups (2 ranks each, replicated across the
// others) where the world allows it (4 ranks), else as groups of one.
std::vector<std::vector<std::string>> modes_of(int world) {
  const int group = world >= 4 && world % 2 == 0 ? 2 : 1;
  return {{"parallel.mode=ddp"},
          {"parallel.mode=zero1"},
          {"parallel.mode=zero2"},
          {"parallel.mode=zero3"},
          {"parallel.mode=hybrid", "parallel.shard_group_size=" + std::to_string(group)}};
}

// A directory shared by all ranks, emptied by rank 0.
std::string shared_dir(Group& world, const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("llm_mpi_ckpt_np" + std::to_string(comm_world().size()) + "_" + name);
  if (world.rank() == 0) fs::remove_all(dir);
  world.barrier();
  return dir.string();
}

Config make_config(const std::string& run_dir, const std::string& resume,
                   std::vector<std::string> mode) {
  std::vector<std::string> o = {"training.batch_size=12",    "training.micro_batch_size=1",
                                "training.warmup_steps=2",   "logging.metrics=false",
                                "checkpoint.dir=" + run_dir, "checkpoint.resume=" + resume};
  o.insert(o.end(), mode.begin(), mode.end());
  return config_load("configs/tiny.toml", o);
}

struct TrainedRun {
  std::vector<float> losses;  // of the steps it trained
  std::vector<float> params;
};

// Trains steps [from, until) (from defaults to where the trainer starts).
TrainedRun train(Trainer& trainer, int until, int from = -1) {
  TrainedRun r;
  for (int s = from < 0 ? trainer.start_step() : from; s < until; ++s) {
    r.losses.push_back(trainer.train_step(s).loss);
  }
  r.params = trainer.engine().gather_all_params();
  return r;
}

std::string mode_name(const std::vector<std::string>& mode) {
  std::string name = mode[0].substr(mode[0].find('=') + 1);
  return name;
}

TEST(CheckpointResume, BitIdenticalToAnUninterruptedRunInEveryMode) {
  Group& world = comm_world();
  for (const auto& mode : modes_of(world.size())) {
    SCOPED_TRACE(mode_name(mode));
    std::string dir = shared_dir(world, "exact_" + mode_name(mode));
    Trainer straight(make_config(dir + "/straight", "none", mode), world);
    TrainedRun whole = train(straight, kSteps);

    std::string saved;
    {
      Trainer first(make_config(dir + "/split", "none", mode), world);
      train(first, kSaveAt);
      saved = first.save_checkpoint(kSaveAt);
    }
    Trainer second(make_config(dir + "/split", "auto", mode), world);  // finds `latest`
    ASSERT_EQ(second.start_step(), kSaveAt);
    TrainedRun rest = train(second, kSteps);
    ASSERT_EQ(rest.losses.size(), static_cast<size_t>(kSteps - kSaveAt));
    for (int s = kSaveAt; s < kSteps; ++s) EXPECT_EQ(rest.losses[s - kSaveAt], whole.losses[s]);
    ASSERT_EQ(rest.params.size(), whole.params.size());
    EXPECT_EQ(0, std::memcmp(rest.params.data(), whole.params.data(), whole.params.size() * 4));
  }
}

// A run of run() to step kSteps (on the schedule of the config's steps),
// saving every 2 steps, in the background or not; returns its parameters.
std::vector<float> run_saving(const std::string& run_dir, std::vector<std::string> mode,
                              bool background) {
  mode.push_back("training.stop_at_step=" + std::to_string(kSteps));
  for (const char* key :
       {"checkpoint.interval=2", "checkpoint.keep_last=0", "training.eval_interval=0",
        "training.eval_sequences=0", "training.sample_tokens=0", "logging.peak_tflops=1"}) {
    mode.push_back(key);
  }
  mode.push_back(std::string("checkpoint.async=") + (background ? "true" : "false"));
  Trainer t(make_config(run_dir, "none", mode), comm_world());
  t.run();
  return t.engine().gather_all_params();
}

// Checkpoints `a` and `b` hold the same files with the same bytes, but for
// the resolved config in meta.json (their run directories differ).
void expect_same_contents(const fs::path& a, const fs::path& b) {
  std::set<std::string> names_a, names_b;
  for (const auto& entry : fs::directory_iterator(a))
    names_a.insert(entry.path().filename().string());
  for (const auto& entry : fs::directory_iterator(b))
    names_b.insert(entry.path().filename().string());
  ASSERT_EQ(names_a, names_b);
  EXPECT_TRUE(names_a.contains("meta.json"));
  for (const std::string& name : names_a) {
    SCOPED_TRACE(name);
    if (name != "meta.json") {
      EXPECT_TRUE(read_file((a / name).string()) == read_file((b / name).string()));
      continue;
    }
    nlohmann::json meta_a = nlohmann::json::parse(read_file((a / name).string()));
    nlohmann::json meta_b = nlohmann::json::parse(read_file((b / name).string()));
    meta_a.erase("config");
    meta_b.erase("config");
    EXPECT_EQ(meta_a, meta_b);
  }
}

// A run saving in the background every 2 steps ends on the uninterrupted
// run's bits; each save holds what a blocking save of the same run writes,
// and resumes to those bits. ddp: rank 0 writes alone; zero2: every rank.
TEST(CheckpointBackground, InvisibleToTheMathAndWritesWhatABlockingSaveWrites) {
  Group& world = comm_world();
  for (const auto& mode : {modes_of(world.size())[0], modes_of(world.size())[2]}) {
    SCOPED_TRACE(mode_name(mode));
    const std::string dir = shared_dir(world, "background_" + mode_name(mode));
    Trainer straight(make_config(dir + "/straight", "none", mode), world);
    const TrainedRun whole = train(straight, kSteps);

    const std::vector<float> background = run_saving(dir + "/background", mode, true);
    ASSERT_EQ(background.size(), whole.params.size());
    EXPECT_EQ(0, std::memcmp(background.data(), whole.params.data(), whole.params.size() * 4));
    run_saving(dir + "/blocking", mode, false);
    if (world.rank() == 0) {
      for (int step : {2, 4, 6}) {
        SCOPED_TRACE("step " + std::to_string(step));
        const std::string name = "step_" + std::to_string(step);
        expect_same_contents(fs::path(dir) / "background" / name,
                             fs::path(dir) / "blocking" / name);
      }
    }
    EXPECT_EQ(read_file(dir + "/background/latest"), "step_6\n");

    for (int step : {2, 4}) {
      SCOPED_TRACE("resumed from step " + std::to_string(step));
      const std::string saved = dir + "/background/step_" + std::to_string(step);
      Trainer resumed(make_config(dir + "/resumed_" + std::to_string(step), saved, mode), world);
      ASSERT_EQ(resumed.start_step(), step);
      const TrainedRun rest = train(resumed, kSteps);
      for (int s = step; s < kSteps; ++s) EXPECT_EQ(rest.losses[s - step], whole.losses[s]);
      EXPECT_EQ(0, std::memcmp(rest.params.data(), whole.params.data(), whole.params.size() * 4));
    }
  }
}

void expect_continues_reference(const TrainedRun& run, const TrainedRun& reference) {
  for (int s = kSaveAt; s < kSteps; ++s) {
    EXPECT_NEAR(run.losses[s - kSaveAt], reference.losses[s], kLossTolerance) << "step " << s + 1;
  }
  float worst = 0;
  for (size_t i = 0; i < reference.params.size(); ++i) {
    worst = std::max(worst, std::abs(run.params[i] - reference.params[i]));
  }
  EXPECT_LE(worst, kParamTolerance);
}

TEST(CheckpointReshard, AnyModeHereLoadsIntoEveryModeAndIntoOneRank) {
  Group& world = comm_world();
  std::unique_ptr<Group> alone = world.split(world.rank(), 0);
  // The single-process reference, computed by each rank alone, saving its own
  // checkpoint halfway (saving does not change the state).
  auto alone_dir = [&](int rank) {
    return mpi_temp_dir("ckpt", "alone_rank" + std::to_string(rank));
  };
  const std::string own_dir = alone_dir(world.rank());
  fs::remove_all(own_dir);
  TrainedRun reference;
  {
    Trainer t(make_config(own_dir, "none", {}), *alone);
    TrainedRun head = train(t, kSaveAt);
    t.save_checkpoint(kSaveAt);
    reference = train(t, kSteps, kSaveAt);
    reference.losses.insert(reference.losses.begin(), head.losses.begin(), head.losses.end());
  }
  world.barrier();  // rank 0's single-process checkpoint is complete
  const std::string from_single = alone_dir(0) + "/step_" + std::to_string(kSaveAt);

  for (const auto& to : modes_of(world.size())) {
    SCOPED_TRACE("single process -> " + mode_name(to));
    std::string dir = shared_dir(world, "from_single_" + mode_name(to));
    Trainer t(make_config(dir, from_single, to), world);
    ASSERT_EQ(t.start_step(), kSaveAt);
    expect_continues_reference(train(t, kSteps), reference);
  }

  for (const auto& from : modes_of(world.size())) {
    std::string saved_dir = shared_dir(world, "from_" + mode_name(from));
    std::string saved;
    {
      Trainer t(make_config(saved_dir, "none", from), world);
      train(t, kSaveAt);
      saved = t.save_checkpoint(kSaveAt);
    }
    for (const auto& to : modes_of(world.size())) {
      SCOPED_TRACE(mode_name(from) + " -> " + mode_name(to));
      std::string dir = shared_dir(world, "to_" + mode_name(to));
      Trainer t(make_config(dir, saved, to), world);
      ASSERT_EQ(t.start_step(), kSaveAt);
      expect_continues_reference(train(t, kSteps), reference);
    }
    SCOPED_TRACE(mode_name(from) + " -> one rank");
    Trainer t(make_config(own_dir + "_to_single", saved, {}), *alone);
    expect_continues_reference(train(t, kSteps), reference);
  }
}

// What a load reads, counted by the source it reads from, is what the engine
// announces before it starts (the size a checkpoint load's progress shows),
// in every mode and with the optimizer offloaded.
TEST(CheckpointLoad, ElementsAnnouncedAreTheElementsRead) {
  class CountingSource : public StateSource {
   public:
    void read(int, size_t, size_t count, float* params, float* m, float* v) override {
      for (float* out : {params, m, v}) {
        if (!out) continue;
        std::fill(out, out + count, 0.0f);
        elements += count;
      }
    }
    size_t elements = 0;
  };
  Group& world = comm_world();
  std::vector<std::vector<std::string>> variants = modes_of(world.size());
  variants.push_back({"parallel.mode=zero2", "offload.optimizer=cpu"});
  for (const auto& variant : variants) {
    SCOPED_TRACE(mode_name(variant) + (variant.size() > 1 ? " " + variant[1] : ""));
    Trainer t(make_config(shared_dir(world, "load_elements"), "none", variant), world);
    for (bool with_moments : {true, false}) {
      CountingSource source;
      t.engine().load_state(source, with_moments);
      EXPECT_EQ(source.elements, t.engine().load_elements(with_moments)) << with_moments;
    }
  }
}

}  // namespace
}  // namespace llm
