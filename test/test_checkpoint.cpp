// Single-process checkpoint behaviour: every kind of bad checkpoint fails
// loudly naming the file, an interrupted save is never chosen, pruning keeps
// what the policy says.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/file_io.h"
#include "trainer/trainer.h"
#include "interop/hf_llama.h"
#include "persistence/checkpoint.h"
#include "persistence/config_diff.h"
#include "persistence/run_directory.h"
#include "parallel/comm.h"
#include "error_of.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
using test_support::error_of;

class CheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("llm_test_ckpt_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
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
  // The error message of constructing and running a trainer ("" if none).
  std::string run_error(std::vector<std::string> extra) {
    try {
      Trainer t(config(extra), comm_world());
      t.run();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

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
  for (const auto& entry : fs::directory_iterator(dir_))
    kept.insert(entry.path().filename().string());
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

// model.init_from takes the checkpoint as a user sees it: the weights file
// (it used to be read as config.json: "not valid JSON"), the config.json or
// the directory; without a config.json beside the weights, the error names it.
TEST_F(CheckpointFiles, InitFromTakesTheWeightsFileTheConfigOrTheDirectory) {
  Trainer trained(config(), comm_world());
  trained.train_step(0);
  const std::string ckpt = trained.save_checkpoint(1);
  const Config saved = checkpoint_read_config(ckpt);
  const ParameterLayout layout = layout_build(saved.model);
  const std::vector<float> params = checkpoint_read_params(ckpt, layout);
  const fs::path hf_dir = dir_ / "hf";
  hf_export(saved.model, layout, params.data(), hf_dir.string(), HfExportOptions{});
  int run = 0;
  for (const fs::path& path : {hf_dir / "model.safetensors", hf_dir / "config.json", hf_dir}) {
    const std::string run_dir = (dir_ / fmt::format("finetune_{}", run++)).string();
    Trainer imported(config({"model.init_from=" + path.string(), "checkpoint.dir=" + run_dir}),
                     comm_world());
    EXPECT_EQ(imported.engine().gather_all_params(), params) << path;
  }
  fs::remove(hf_dir / "config.json");
  const std::string message = error_of([&] {
    Trainer(config({"model.init_from=" + (hf_dir / "model.safetensors").string(),
                    "checkpoint.dir=" + (dir_ / "finetune_missing").string()}),
            comm_world());
  });
  EXPECT_CONTAINS(message, (hf_dir / "config.json").string() + ": missing");
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// `latest` names a step directory of its run and nothing else; a name the
// filesystem refuses (found by fuzz_checkpoint_meta) is a clean error too.
TEST_F(CheckpointFiles, LatestMustNameAStepDirectory) {
  fs::create_directories(dir_);
  for (const std::string& name :
       {std::string(300, 'a'), std::string("../elsewhere"), std::string("step_1/../../x")}) {
    write_file_atomically((dir_ / "latest").string(), name + "\n");
    EXPECT_CONTAINS(error_of([&] { checkpoint_latest(dir_.string()); }),
                    "not the name of a step_N directory");
  }
}

// Fine-tuning data must begin and end documents as the model learned to:
// init_from refuses a tokenizer whose BOS or EOS is not the config.json's.
TEST_F(CheckpointFiles, InitFromRefusesATokenizerWithOtherDocumentTokens) {
  Trainer trained(config(), comm_world());
  const std::string ckpt = trained.save_checkpoint(0);
  const Config saved = checkpoint_read_config(ckpt);
  const ParameterLayout layout = layout_build(saved.model);
  const std::vector<float> params = checkpoint_read_params(ckpt, layout);
  for (const auto& [bos, eos] : {std::pair{5, 2}, std::pair{1, 7}}) {
    HfExportOptions options;
    options.bos_token_id = bos;
    options.eos_token_id = eos;
    const std::string hf_dir = (dir_ / fmt::format("hf_{}_{}", bos, eos)).string();
    hf_export(saved.model, layout, params.data(), hf_dir, options);
    const std::string message = error_of([&] {
      Trainer(config({"model.init_from=" + hf_dir,
                      "checkpoint.dir=" + (dir_ / fmt::format("ft_{}_{}", bos, eos)).string()}),
              comm_world());
    });
    EXPECT_CONTAINS(message, bos != 1 ? "bos_token_id is 5" : "eos_token_id is 7");
    EXPECT_CONTAINS(message, "data/tiny/tokenizer.model");
  }
}

// A run resumed at step 4 with stop_at_step 2 used to "save step_2" holding
// step-4 weights; now it is refused, and no save can misname its state.
TEST_F(CheckpointFiles, StopAtStepAtOrBelowTheResumedStepIsRefused) {
  save_after(4);
  for (const char* stop : {"training.stop_at_step=2", "training.stop_at_step=4"}) {
    const std::string message = load_error((dir_ / "step_4").string(), {stop});
    EXPECT_CONTAINS(message, "training.stop_at_step = ");
    EXPECT_CONTAINS(message, "at step 4");
    EXPECT_CONTAINS(message, "--checkpoint.resume=none");
  }
  EXPECT_EQ(run_error({"checkpoint.resume=auto", "training.stop_at_step=2"}).empty(), false);
  EXPECT_FALSE(fs::exists(dir_ / "step_2"));
  EXPECT_EQ(checkpoint_latest(dir_.string()), (dir_ / "step_4").string());
}

TEST_F(CheckpointFiles, SaveUnderAnotherStepNumberIsRefused) {
  Trainer t(config(), comm_world());
  t.train_step(0);
  t.train_step(1);
  std::string message;
  try {
    t.save_checkpoint(5);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_CONTAINS(message, "refusing to save the state after step 2 as step_5");
  EXPECT_FALSE(fs::exists(dir_ / "step_5"));
  EXPECT_EQ(t.save_checkpoint(2), (dir_ / "step_2").string());
}

// Same tensor shapes, another model: 8 heads of 8 instead of 4 heads of 16
// (with 8 kv heads for 2), another RoPE base and norm epsilon.
TEST_F(CheckpointFiles, ResumeIntoAnotherModelIsRefusedNamingEachKey) {
  const std::string ckpt = save_after(1);
  const std::string message =
      load_error(ckpt, {"model.n_heads=8", "model.n_kv_heads=4", "model.rope_theta=500000",
                        "model.norm_eps=1e-6", "model.init_from=somewhere/else"});
  EXPECT_CONTAINS(message, "saved with another model");
  EXPECT_CONTAINS(message, "model.n_heads: 4 -> 8");
  EXPECT_CONTAINS(message, "model.n_kv_heads: 2 -> 4");
  EXPECT_CONTAINS(message, "model.rope_theta: 10000");
  EXPECT_CONTAINS(message, "model.norm_eps: ");
  EXPECT_EQ(message.find("init_from"), std::string::npos) << message;  // may differ
  EXPECT_CONTAINS(message, "--checkpoint.resume=none or use a new checkpoint.dir");
}

// Schedule and data changes resume (a run may be extended), each reported.
TEST_F(CheckpointFiles, ScheduleAndDataChangesAreReportedNotRefused) {
  const std::string ckpt = save_after(1);
  Config changed = config({"training.lr=0.001", "training.steps=80", "training.eval_interval=7",
                           "data.val=data/tiny/train_*.bin"});
  const ConfigChanges changes = checkpoint_config_changes(ckpt, changed);
  EXPECT_TRUE(changes.model.empty());
  ASSERT_EQ(changes.schedule.size(), 3u);  // eval_interval does not change the trajectory
  EXPECT_CONTAINS(changes.schedule[0],
                  "data.val: 'data/tiny/val_*.bin' -> 'data/tiny/train_*.bin'");
  EXPECT_CONTAINS(changes.schedule[1], "training.lr: 0.003");
  EXPECT_CONTAINS(changes.schedule[2], "training.steps: 40 -> 80");
  Trainer resumed(config({"checkpoint.resume=" + ckpt, "training.lr=0.001"}), comm_world());
  EXPECT_EQ(resumed.start_step(), 1);
}

// A checkpoint saved by an older build resumes with no change listed: its
// training.activation_checkpointing and training.checkpoint_every are today's
// training.recompute and training.recompute_every, and a key it did not have
// (model.qk_norm, model.qkv_bias) is no change at its default.
TEST_F(CheckpointFiles, AnOlderBuildsConfigIsNoChange) {
  const std::string ckpt = save_after(1);
  const std::string meta_path = ckpt + "/meta.json";
  nlohmann::json meta = nlohmann::json::parse(read_file(meta_path));
  std::string saved = meta["config"].get<std::string>();
  for (auto [now, before] :
       {std::pair{"\nrecompute = ", "\nactivation_checkpointing = "},
        std::pair{"\nrecompute_every = ", "\ncheckpoint_every = "},
        std::pair{"\nqk_norm = false", ""}, std::pair{"\nqkv_bias = false", ""}}) {
    const size_t at = saved.find(now);
    ASSERT_NE(at, std::string::npos) << now;
    saved.replace(at, std::string(now).size(), before);
  }
  meta["config"] = saved;
  write_file_atomically(meta_path, meta.dump());
  const ConfigChanges same = checkpoint_config_changes(ckpt, config({}));
  EXPECT_TRUE(same.model.empty()) << same.model[0];
  EXPECT_TRUE(same.schedule.empty()) << same.schedule[0];
  // Away from its default, the key the older build lacked is a change.
  const ConfigChanges changed = checkpoint_config_changes(ckpt, config({"model.qk_norm=true"}));
  ASSERT_EQ(changed.model.size(), 1u);
  EXPECT_CONTAINS(changed.model[0], "model.qk_norm: (absent) -> true");
}

// A meta.json field missing, of the wrong type, negative or absurd is one
// error naming the file and the field (not a json exception or bad_alloc).
TEST_F(CheckpointFiles, DamagedMetaJsonIsNamedWithItsField) {
  const std::string ckpt = save_after(1);
  const std::string meta_path = ckpt + "/meta.json";
  const nlohmann::json good = nlohmann::json::parse(read_file(meta_path));
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& m) { m.erase("tensors"); }, "missing field 'tensors'"},
      {[](nlohmann::json& m) { m["step"] = -3; }, "field 'step' must be an integer"},
      {[](nlohmann::json& m) { m["step"] = "7"; }, "field 'step' must be an integer"},
      {[](nlohmann::json& m) { m["shards"] = 5; }, "field 'shards' must be an array"},
      {[](nlohmann::json& m) { m["shards"][0]["records"][0]["count"] = 1000000000000000ull; },
       "field 'shards[0].records[0].count' must be an integer in [0, "},
      {[](nlohmann::json& m) { m["shards"][0]["records"][1].erase("crc32"); },
       "missing field 'shards[0].records[1].crc32'"},
      {[](nlohmann::json& m) { m["shards"][0]["file"] = "../../etc/passwd"; },
       "field 'shards[0].file' must name a file inside the checkpoint"},
      {[](nlohmann::json& m) { m["tensors"][2]["shape"][0] = -1; }, "field 'tensors[2].shape[0]'"},
      {[](nlohmann::json& m) { m["format"] = 1; }, "field 'format' must be a string"},
  };
  for (const auto& [edit, expected] : cases) {
    nlohmann::json meta = good;
    edit(meta);
    write_file_atomically(meta_path, meta.dump());
    const std::string message = load_error(ckpt);
    EXPECT_CONTAINS(message, meta_path);
    EXPECT_CONTAINS(message, expected);
  }
}

// A directory such as step_best/ used to break every later save (std::stoi).
TEST_F(CheckpointFiles, DirectoriesNotNamedStepNAreIgnored) {
  for (const char* name : {"step_best", "step_", "step_12abc", "step_99999999999"}) {
    fs::create_directories(dir_ / name);
    std::ofstream(dir_ / name / "meta.json") << "{}";
  }
  Trainer t(config({"checkpoint.keep_last=1"}), comm_world());
  for (int s = 0; s < 3; ++s) {
    t.train_step(s);
    EXPECT_NO_THROW(t.save_checkpoint(s + 1));
  }
  std::set<std::string> kept;
  for (const auto& entry : fs::directory_iterator(dir_))
    kept.insert(entry.path().filename().string());
  EXPECT_EQ(kept, (std::set<std::string>{"latest", "step_3", "step_best", "step_", "step_12abc",
                                         "step_99999999999"}));
  EXPECT_EQ(checkpoint_step_of("step_17"), 17);
  EXPECT_EQ(checkpoint_step_of("step_-1"), -1);
  EXPECT_EQ(checkpoint_step_of("step_1e3"), -1);
}

// A save that fails (here: a file size limit standing in for a full disk)
// removes its .step_N.tmp/; what a killed save left is removed at the next start.
TEST_F(CheckpointFiles, FailedSaveLeavesNoTemporariesAndStaleOnesAreRemovedAtStart) {
  Trainer t(config(), comm_world());
  t.train_step(0);
  struct rlimit old_limit {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    t.save_checkpoint(1);
  } catch (const Error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  EXPECT_CONTAINS(message, (dir_ / ".step_1.tmp" / "shard_00000.bin").string());
  EXPECT_FALSE(fs::exists(dir_ / ".step_1.tmp"));
  EXPECT_FALSE(fs::exists(dir_ / "latest"));

  fs::create_directories(dir_ / ".step_7.tmp");
  std::ofstream(dir_ / ".step_7.tmp" / "shard_00000.bin") << "partial";
  std::ofstream(dir_ / "latest.tmp") << "step_";
  EXPECT_EQ(run_error({"training.steps=1", "training.eval_sequences=0"}), "");
  EXPECT_FALSE(fs::exists(dir_ / ".step_7.tmp"));
  EXPECT_FALSE(fs::exists(dir_ / "latest.tmp"));
  EXPECT_EQ(checkpoint_latest(dir_.string()), (dir_ / "step_1").string());
}

// A background save that fails (the same stand-in for a full disk, above the
// size of the files a run writes at its start) stops the run on the step
// loop's thread with the usual error naming the file, removes its
// .step_N.tmp/, and never moves `latest`.
TEST_F(CheckpointFiles, FailedBackgroundSaveStopsTheRunNamingTheFile) {
  // MPI starts under the usual limit: its shared-memory segments are files
  // too, and in a process of its own (ctest) this test is the first to start it.
  comm_world();
  struct rlimit old_limit {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
  struct rlimit small = old_limit;
  small.rlim_cur = 256 << 10;  // the tiny model's shard is larger, its config and tokenizer smaller
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string message =
      run_error({"checkpoint.async=true", "checkpoint.interval=1", "training.steps=3",
                 "training.eval_sequences=0", "training.sample_tokens=0", "logging.peak_tflops=1"});
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  EXPECT_CONTAINS(message, (dir_ / ".step_1.tmp" / "shard_00000.bin").string());
  EXPECT_FALSE(fs::exists(dir_ / ".step_1.tmp"));
  EXPECT_FALSE(fs::exists(dir_ / "latest"));
}

// A rank whose free host memory cannot hold the background save's copy
// makes the run save blocking, with one warning naming checkpoint.async
// (the test hook LLM_FAULT_HOST_MEMORY_FREE shrinks what rank 0 sees).
TEST_F(CheckpointFiles, AsyncSaveFallsBackToBlockingWhenTheCopyDoesNotFit) {
  for (const bool shrunk : {false, true}) {
    SCOPED_TRACE(shrunk ? "1 KiB free" : "this machine's free memory");
    fs::remove_all(dir_);
    if (shrunk) setenv("LLM_FAULT_HOST_MEMORY_FREE", "0:1024", 1);
    testing::internal::CaptureStdout();
    const std::string error = run_error({"checkpoint.async=true", "checkpoint.interval=1",
                                         "training.steps=2", "training.eval_sequences=0",
                                         "training.sample_tokens=0", "logging.peak_tflops=1"});
    spdlog::default_logger()->flush();
    const std::string log = testing::internal::GetCapturedStdout();
    unsetenv("LLM_FAULT_HOST_MEMORY_FREE");
    EXPECT_EQ(error, "");
    const std::string warning = "checkpoint.async: rank 0 would need ";
    EXPECT_EQ(log.find(warning) != std::string::npos, shrunk) << log;
    EXPECT_EQ(log.find("1.00 KiB is free per rank; saving blocking") != std::string::npos, shrunk)
        << log;
    EXPECT_EQ(log.find("in the background") == std::string::npos, shrunk) << log;
    EXPECT_TRUE(fs::exists(dir_ / "step_2"));
  }
}

// A second run on the same run directory is refused, naming the holder.
TEST_F(CheckpointFiles, SecondRunOnTheSameDirectoryIsRefused) {
  fs::create_directories(dir_);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  {
    FileLock other((dir_ / ".lock").string(), "run directory");
    const std::string message = run_error({"training.steps=1"});
    EXPECT_CONTAINS(message, (dir_ / ".lock").string());
    EXPECT_CONTAINS(message, "another run holds the run directory " + dir_.string());
    EXPECT_CONTAINS(message, fmt::format("host {} pid {}", host, getpid()));
    EXPECT_FALSE(fs::exists(dir_ / "step_1"));
  }
  EXPECT_EQ(run_error({"training.steps=1", "training.eval_sequences=0"}), "");  // released
  EXPECT_TRUE(fs::exists(dir_ / "step_1"));
}

}  // namespace
}  // namespace llm
