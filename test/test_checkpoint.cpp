// Single-process checkpoint behaviour: every kind of bad checkpoint fails
// loudly naming the file, an interrupted save is never chosen, pruning keeps
// what the policy says.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/error.h"
#include "runtime/file_io.h"
#include "trainer/trainer.h"
#include "interop/hf_llama.h"
#include "parallel/checkpoint.h"
#include "parallel/comm.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

class CheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("llm_test_ckpt_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Config config(std::vector<std::string> extra = {}) {
    std::vector<std::string> o = {"checkpoint.dir=" + dir_.string(), "logging.metrics=false",
                                  "checkpoint.resume=none"};
    o.insert(o.end(), extra.begin(), extra.end());
    return config_load("configs/tiny.toml", o);
  }
  // Saves after `steps` steps; returns the checkpoint directory.
  std::string save_after(int steps, std::vector<std::string> extra = {}) {
    Trainer t(config(extra), comm_world());
    for (int s = 0; s < steps; ++s) t.train_step(s);
    return t.save_checkpoint(steps);
  }
  // The error message of loading `path` into a fresh tiny trainer.
  std::string load_error(const std::string& path, std::vector<std::string> extra = {}) {
    extra.push_back("checkpoint.resume=" + path);
    try {
      Trainer t(config(extra), comm_world());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string shard(const std::string& ckpt) { return ckpt + "/shard_00000.bin"; }

  fs::path dir_;
};

TEST_F(CheckpointFiles, LayoutOnDiskAndLatest) {
  std::string ckpt = save_after(2);
  EXPECT_EQ(ckpt, (dir_ / "step_2").string());
  EXPECT_TRUE(fs::exists(ckpt + "/meta.json"));
  EXPECT_TRUE(fs::exists(shard(ckpt)));
  EXPECT_EQ(checkpoint_latest(dir_.string()), ckpt);
  // 3 floats (param, m, v) per parameter, in one shard for a world of one.
  const size_t params = layout_build(config().model).total_numel;
  EXPECT_EQ(fs::file_size(shard(ckpt)), 3 * 4 * params);
  Trainer resumed(config({"checkpoint.resume=auto"}), comm_world());
  EXPECT_EQ(resumed.start_step(), 2);
}

TEST_F(CheckpointFiles, MissingShardIsNamed) {
  std::string ckpt = save_after(1);
  fs::remove(shard(ckpt));
  EXPECT_NE(load_error(ckpt).find("shard " + shard(ckpt) + " is missing"), std::string::npos);
}

TEST_F(CheckpointFiles, TruncatedShardIsNamed) {
  std::string ckpt = save_after(1);
  fs::resize_file(shard(ckpt), fs::file_size(shard(ckpt)) - 4);
  std::string message = load_error(ckpt);
  EXPECT_NE(message.find(shard(ckpt)), std::string::npos) << message;
  EXPECT_NE(message.find("meta.json says"), std::string::npos) << message;
}

TEST_F(CheckpointFiles, FlippedByteFailsTheChecksum) {
  std::string ckpt = save_after(1);
  {
    std::fstream f(shard(ckpt), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(1000);
    f.write(&c, 1);
  }
  std::string message = load_error(ckpt);
  EXPECT_NE(message.find("checksum mismatch in " + shard(ckpt)), std::string::npos) << message;
}

TEST_F(CheckpointFiles, IndexInconsistentWithTheConfigIsNamed) {
  std::string ckpt = save_after(1);
  std::string message = load_error(ckpt, {"model.ffn_dim=128"});
  EXPECT_NE(message.find(ckpt + "/meta.json"), std::string::npos) << message;
  EXPECT_NE(message.find("layers.0.mlp.w13"), std::string::npos) << message;
  message = load_error(ckpt, {"model.n_layers=3"});
  EXPECT_NE(message.find("tensors but the config's model has"), std::string::npos) << message;
}

TEST_F(CheckpointFiles, NotACheckpointIsNamed) {
  fs::create_directories(dir_ / "empty");
  EXPECT_NE(load_error((dir_ / "empty").string()).find("no meta.json"), std::string::npos);
  std::string ckpt = save_after(1);
  write_file_atomically(ckpt + "/meta.json", "{ not json");
  EXPECT_NE(load_error(ckpt).find("meta.json: not valid JSON"), std::string::npos);
}

TEST_F(CheckpointFiles, InterruptedSaveIsNeverChosen) {
  std::string good = save_after(1);
  // What a save killed before its rename leaves behind.
  fs::create_directories(dir_ / ".step_2.tmp");
  std::ofstream(dir_ / ".step_2.tmp" / "shard_00000.bin") << "partial";
  EXPECT_EQ(checkpoint_latest(dir_.string()), good);
  Trainer resumed(config({"checkpoint.resume=auto"}), comm_world());
  EXPECT_EQ(resumed.start_step(), 1);
}

TEST_F(CheckpointFiles, PruningKeepsTheNewestAndTheMilestones) {
  Trainer t(config({"checkpoint.keep_last=2", "checkpoint.keep_every=4"}), comm_world());
  for (int s = 0; s < 6; ++s) {
    t.train_step(s);
    t.save_checkpoint(s + 1);
  }
  std::set<std::string> kept;
  for (const auto& entry : fs::directory_iterator(dir_)) kept.insert(entry.path().filename().string());
  EXPECT_EQ(kept, (std::set<std::string>{"latest", "step_4", "step_5", "step_6"}));
}

// Checkpoint -> Hugging Face export -> init_from gives identical parameters,
// for a tied and an untied LM head.
TEST_F(CheckpointFiles, HuggingFaceExportThenImportRoundTrips) {
  for (std::string tied : {"true", "false"}) {
    SCOPED_TRACE("tie_embeddings " + tied);
    std::vector<std::string> shape = {"model.tie_embeddings=" + tied};
    Trainer trained(config(shape), comm_world());
    for (int s = 0; s < 2; ++s) trained.train_step(s);
    std::string ckpt = trained.save_checkpoint(2);
    std::vector<float> expected = trained.engine().gather_all_params();

    Config saved = checkpoint_read_config(ckpt);
    ParameterLayout layout = layout_build(saved.model);
    std::vector<float> params = checkpoint_read_params(ckpt, layout);
    EXPECT_EQ(params, expected);
    std::string hf_dir = (dir_ / ("hf_" + tied)).string();
    hf_export(saved.model, layout, params.data(), hf_dir, HfExportOptions{});

    shape.push_back("model.init_from=" + hf_dir);
    shape.push_back("checkpoint.dir=" + (dir_ / ("finetune_" + tied)).string());
    Trainer imported(config(shape), comm_world());
    EXPECT_EQ(imported.start_step(), 0);
    EXPECT_EQ(imported.engine().gather_all_params(), expected);
  }
}

}  // namespace
}  // namespace llm
