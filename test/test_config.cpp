// Config parsing: defaults, TOML values, CLI overrides and their precedence,
// and the errors for unknown keys, wrong types and impossible values.
#include <gtest/gtest.h>

#include "config/config.h"
#include "runtime/error.h"

namespace llm {
namespace {

const char* kMinimal = R"(
[data]
train = "data/tiny/train_*.bin"
)";

// Runs `fn` and returns the llm::Error message it throws ("" if none).
template <class F> std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsApplyWhenKeysAreAbsent) {
  Config c = config_parse(kMinimal, "configs/x.toml", {});
  EXPECT_EQ(c.name, "x");
  EXPECT_EQ(c.model.dim, ModelConfig{}.dim);
  EXPECT_EQ(c.training.lr_schedule, LrSchedule::cosine);
  EXPECT_EQ(c.run_dir(), "checkpoints/x");
}

TEST(Config, OverrideBeatsFileBeatsDefault) {
  std::string text = std::string(kMinimal) + "[training]\nsteps = 7\nlr = 1\n";
  Config c = config_parse(text, "a.toml", {"training.steps=9", "model.tie_embeddings=false",
                                           "parallel.mode=zero3", "checkpoint.dir=/tmp/run"});
  EXPECT_EQ(c.training.steps, 9);               // override over file
  EXPECT_DOUBLE_EQ(c.training.lr, 1.0);         // integer accepted for a float key
  EXPECT_FALSE(c.model.tie_embeddings);         // override over default
  EXPECT_EQ(c.parallel.mode, ParallelMode::zero3);
  EXPECT_EQ(c.run_dir(), "/tmp/run");
}

TEST(Config, UnknownKeysAreErrorsNamingThem) {
  std::string text = std::string(kMinimal) + "[model]\ndimm = 3\n";
  EXPECT_NE(error_of([&] { config_parse(text, "a.toml", {}); }).find("unknown key 'model.dimm'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { config_parse(std::string(kMinimal) + "[modle]\n", "a.toml", {}); })
                .find("'modle'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { config_parse(kMinimal, "a.toml", {"training.stepz=3"}); })
                .find("unknown key 'training.stepz'"),
            std::string::npos);
}

TEST(Config, WrongTypesAreErrorsNamingTheKey) {
  std::string text = std::string(kMinimal) + "[training]\nsteps = \"ten\"\n";
  std::string message = error_of([&] { config_parse(text, "a.toml", {}); });
  EXPECT_NE(message.find("a.toml: training.steps: expected an integer"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { config_parse(kMinimal, "a.toml", {"training.lr=fast"}); })
                .find("command line --training.lr: expected a number"),
            std::string::npos);
  EXPECT_NE(error_of([&] { config_parse(kMinimal, "a.toml", {"model.tie_embeddings=1"}); })
                .find("expected true or false"),
            std::string::npos);
  EXPECT_NE(error_of([&] { config_parse(kMinimal, "a.toml", {"training.steps=1.5"}); })
                .find("expected an integer"),
            std::string::npos);
}

TEST(Config, ImpossibleValuesAreErrorsNamingTheKey) {
  auto message_for = [](const std::string& assignment) {
    return error_of([&] { config_parse(kMinimal, "a.toml", {assignment}); });
  };
  EXPECT_NE(message_for("model.n_kv_heads=3").find("model.n_kv_heads (3) must divide model.n_heads"),
            std::string::npos);
  EXPECT_NE(message_for("training.micro_batch_size=3").find("training.batch_size (8) must be a multiple"),
            std::string::npos);
  EXPECT_NE(message_for("parallel.mode=pipeline").find("parallel.mode"), std::string::npos);
  EXPECT_NE(message_for("training.lr_schedule=step").find("training.lr_schedule"), std::string::npos);
  EXPECT_NE(message_for("model.dim=0").find("model.dim must be positive"), std::string::npos);
  EXPECT_NE(error_of([] { config_parse("", "a.toml", {}); }).find("data.train"), std::string::npos);
}

TEST(Config, DeviceAndCommAreValidatedTogether) {
  auto message_for = [](std::vector<std::string> overrides) {
    return error_of([&] { config_parse(kMinimal, "a.toml", overrides); });
  };
  EXPECT_NE(message_for({"training.device=tpu"}).find("training.device: expected cpu or cuda"),
            std::string::npos);
  EXPECT_NE(message_for({"parallel.comm=gloo"}).find("parallel.comm: expected auto, mpi or nccl"),
            std::string::npos);
  EXPECT_NE(message_for({"parallel.comm=nccl"}).find("parallel.comm = nccl needs training.device = cuda"),
            std::string::npos);
  // auto resolves to the device's natural transport.
  EXPECT_EQ(config_parse(kMinimal, "a.toml", {}).comm(), CommBackend::mpi);
  Config gpu = config_parse(kMinimal, "a.toml", {"training.device=cuda"});
  EXPECT_EQ(gpu.device(), Device::cuda);
  EXPECT_EQ(gpu.comm(), CommBackend::nccl);
  EXPECT_EQ(config_parse(kMinimal, "a.toml", {"training.device=cuda", "parallel.comm=mpi"}).comm(), CommBackend::mpi);
}

TEST(Config, SyntaxErrorNamesFileAndLine) {
  std::string message = error_of([] { config_parse("[model]\ndim = = 3\n", "bad.toml", {}); });
  EXPECT_NE(message.find("bad.toml:2"), std::string::npos) << message;
}

TEST(Config, MissingFileIsAnError) {
  EXPECT_NE(error_of([] { config_load("no_such_config", {}); }).find("'no_such_config' not found"),
            std::string::npos);
}

TEST(Config, DumpParsesBackToTheSameValues) {
  Config c = config_parse(kMinimal, "a.toml", {"training.lr=0.00123", "model.n_layers=3"});
  std::string dumped = config_to_toml(c);
  Config again = config_parse(dumped, "a.toml", {});
  EXPECT_EQ(config_to_toml(again), dumped);
  EXPECT_DOUBLE_EQ(again.training.lr, 0.00123);
  EXPECT_EQ(again.model.n_layers, 3);
}

}  // namespace
}  // namespace llm
