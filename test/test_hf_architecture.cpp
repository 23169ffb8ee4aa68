// model.init_from takes the architecture from the checkpoint's config.json: a
// config with data and training keys only gets every model key that file
// decides (each compared with the file's JSON as written, not with our
// reader's result), a key the user sets must agree or the one-line error
// names both values and where each came from, the run trains from the
// weights, its saved config holds the imported values and it resumes. Every
// shipped fine-tuning config loads this way and names no architecture key.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "persistence/checkpoint.h"
#include "data/shard.h"
#include "interop/hf_llama.h"
#include "parallel/comm.h"
#include "test/error_of.h"
#include "test/temp_dir.h"
#include "trainer/trainer.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
using test_support::error_of;
using test_support::TempDir;

constexpr char kTempPrefix[] = "llm_test_hf_architecture_";

// A fine-tuning config as a user writes it: no [model] table.
constexpr char kFinetune[] = R"(
[training]
steps = 2
batch_size = 2
micro_batch_size = 1
seq_len = 16
lr = 1e-5
warmup_steps = 0
eval_interval = 0

[data]
train = "unused"
)";

Config finetune(const std::string& toml, const std::vector<std::string>& overrides) {
  return config_parse(toml, "finetune.toml", overrides, hf_import_architecture);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  return nlohmann::json::parse(in);
}

// Every model key against the config.json it came from, by transformers' names.
void expect_model_is(const ModelConfig& m, const nlohmann::json& json) {
  EXPECT_EQ(m.dim, json["hidden_size"].get<int>());
  EXPECT_EQ(m.n_layers, json["num_hidden_layers"].get<int>());
  EXPECT_EQ(m.n_heads, json["num_attention_heads"].get<int>());
  EXPECT_EQ(m.n_kv_heads, json["num_key_value_heads"].get<int>());
  // Without head_dim (Qwen2's config), heads are hidden_size / num_attention_heads wide.
  EXPECT_EQ(m.resolved_head_dim(),
            json.contains("head_dim") ? json["head_dim"].get<int>() : m.dim / m.n_heads);
  EXPECT_EQ(m.ffn_dim, json["intermediate_size"].get<int>());
  EXPECT_EQ(m.vocab_size, json["vocab_size"].get<int>());
  EXPECT_EQ(m.rope_theta, json["rope_theta"].get<double>());
  EXPECT_EQ(m.norm_eps, json["rms_norm_eps"].get<double>());
  EXPECT_EQ(m.tie_embeddings, json["tie_word_embeddings"].get<bool>());
  EXPECT_EQ(m.qk_norm, json["model_type"] == "qwen3");
  EXPECT_EQ(m.qkv_bias, json["model_type"] == "qwen2");
  const nlohmann::json& scaling = json["rope_scaling"];
  if (scaling.is_null()) {
    EXPECT_EQ(m.rope_scaling_factor, 1.0);
  } else {
    EXPECT_EQ(m.rope_scaling_factor, scaling["factor"].get<double>());
    EXPECT_EQ(m.rope_low_freq_factor, scaling["low_freq_factor"].get<double>());
    EXPECT_EQ(m.rope_high_freq_factor, scaling["high_freq_factor"].get<double>());
    EXPECT_EQ(m.rope_original_context, scaling["original_max_position_embeddings"].get<int>());
  }
}

// hf_tiny_llama's config.json with every architecture key off our default
// (the tiny checkpoints share some: 4 heads, no QK-norm, no RoPE scaling):
// Qwen3's QK-norm, wider heads, Llama 3.1's RoPE scaling.
std::string write_config_off_defaults(const TempDir& dir) {
  nlohmann::json json = read_json("test/data/hf_tiny_llama/config.json");
  json["model_type"] = "qwen3";
  json["num_attention_heads"] = 8;
  json["num_key_value_heads"] = 2;
  json["head_dim"] = 8;  // not hidden_size / num_attention_heads
  json["rope_theta"] = 500000.0;
  json["rms_norm_eps"] = 1e-6;
  json["rope_scaling"] = {{"rope_type", "llama3"},
                          {"factor", 8.0},
                          {"low_freq_factor", 2.0},
                          {"high_freq_factor", 8.0},
                          {"original_max_position_embeddings", 32}};
  std::ofstream(dir.file("config.json")) << json.dump(2);
  return dir.file("config.json");
}

TEST(HfArchitecture, EveryModelKeyComesFromConfigJson) {
  TempDir dir(kTempPrefix);
  const std::string off_defaults = write_config_off_defaults(dir);
  for (const std::string& checkpoint :
       {std::string("test/data/hf_tiny_llama"), std::string("test/data/hf_tiny_llama32"),
        std::string("test/data/hf_tiny_qwen2"), std::string("test/data/hf_tiny_qwen3"),
        off_defaults}) {
    SCOPED_TRACE(checkpoint);
    const std::string config_json =
        fs::is_directory(checkpoint) ? checkpoint + "/config.json" : checkpoint;
    const Config c = finetune(kFinetune, {"model.init_from=" + checkpoint});
    expect_model_is(c.model, read_json(config_json));
    // Each imported key names the file it came from (errors, the log).
    EXPECT_GE(c.imported.size(), 12u);
    for (const auto& [key, origin] : c.imported) EXPECT_EQ(origin, config_json) << key;
    // The saved config holds the imported values: read back without the
    // checkpoint (as a resume does), it is the same model.
    const Config saved = config_parse(config_to_toml(c), "saved.toml", {});
    EXPECT_EQ(config_to_toml(saved), config_to_toml(c));
  }
  // Every key of the last one is off its default, so none could pass unread,
  // but for the part of another model_type (Qwen2's biases; hf_tiny_qwen2
  // above has them on).
  const Config c = finetune(kFinetune, {"model.init_from=" + off_defaults});
  const ModelConfig defaults;
  EXPECT_EQ(c.imported.size(), 16u);
  for (const auto& [key, origin] : c.imported) {
    const std::string name = key.substr(std::string("model.").size());
    if (name == "qkv_bias") continue;
    EXPECT_NE(config_model_value(c.model, name), config_model_value(defaults, name)) << key;
  }
}

TEST(HfArchitecture, WithoutInitFromNothingIsImported) {
  const Config c =
      finetune(kFinetune, {"model.init_from=test/data/hf_tiny_llama", "model.init_from="});
  EXPECT_TRUE(c.imported.empty());
  EXPECT_EQ(config_to_toml(c), config_to_toml(config_parse(kFinetune, "finetune.toml", {})));
}

TEST(HfArchitecture, AKeyTheUserSetMustAgreeNamingBothValuesAndWhere) {
  const std::string llama = "test/data/hf_tiny_llama";
  std::string message = error_of([&] {
    finetune(std::string("[model]\nn_kv_heads = 4\n") + kFinetune, {"model.init_from=" + llama});
  });
  EXPECT_CONTAINS(message, "finetune.toml: model.n_kv_heads = 4 but " + llama +
                               "/config.json says 2; leave model.n_kv_heads out");
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;

  message = error_of([&] {
    finetune(std::string("[model]\nrope_theta = 10000.0\n") + kFinetune,
             {"model.init_from=" + llama, "model.rope_theta=500000"});
  });
  EXPECT_CONTAINS(message,
                  "command line --model.rope_theta=500000: model.rope_theta = 500000.0 "
                  "but " +
                      llama + "/config.json says 10000.0");

  // Qwen3's heads (16 wide) are not hidden_size / num_attention_heads (8).
  message = error_of([&] {
    finetune(kFinetune, {"model.init_from=test/data/hf_tiny_qwen3", "model.head_dim=0"});
  });
  EXPECT_CONTAINS(message, "model.head_dim = 0 but test/data/hf_tiny_qwen3/config.json says 16");
  message = error_of([&] {
    finetune(kFinetune, {"model.init_from=test/data/hf_tiny_qwen3", "model.qk_norm=false"});
  });
  EXPECT_CONTAINS(message,
                  "model.qk_norm = false but test/data/hf_tiny_qwen3/config.json says true");
}

TEST(HfArchitecture, AKeyTheUserSetThatAgreesIsKept) {
  const std::string llama = "test/data/hf_tiny_llama";
  // head_dim 8 is hidden_size / num_attention_heads: the same width, spelt out.
  const Config c = finetune(
      std::string("[model]\nn_kv_heads = 2\nhead_dim = 8\ntie_embeddings = false\n") + kFinetune,
      {"model.init_from=" + llama, "model.dim=32"});
  EXPECT_EQ(c.model.head_dim, 8);
  expect_model_is(c.model, read_json(llama + "/config.json"));
  for (const char* key :
       {"model.n_kv_heads", "model.head_dim", "model.tie_embeddings", "model.dim"}) {
    EXPECT_FALSE(c.imported.contains(key)) << key;
  }
  EXPECT_TRUE(c.imported.contains("model.n_layers"));
}

// From a config without a model section: the weights load into the imported
// architecture, a step trains, and the saved run resumes with the same model,
// also once the download is gone, from the run's own resolved config.
void expect_finetune_trains_and_resumes(const std::string& checkpoint) {
  SCOPED_TRACE(checkpoint);
  TempDir dir(kTempPrefix);
  const int vocab = read_json(checkpoint + "/config.json")["vocab_size"].get<int>();
  std::vector<uint32_t> tokens(512);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint32_t>((i * 7 + 3) % vocab);
  shard_write(dir.file("train_0.bin"), tokens, vocab);
  const std::vector<std::string> overrides = {
      "model.init_from=" + checkpoint, "data.train=" + dir.file("train_*.bin"),
      "checkpoint.dir=" + dir.file("run"), "logging.metrics=false"};

  const Config config = finetune(kFinetune, overrides);
  std::string saved;
  {
    Trainer trainer(config, comm_world());
    const ParameterLayout layout = layout_build(config.model);
    const HfWeights weights = HfWeights::open(checkpoint, config.model, layout);
    std::vector<float> expected;
    for (size_t u = 0; u < layout.units.size(); ++u) {
      std::vector<float> unit(layout.units[u].numel);
      weights.read(static_cast<int>(u), 0, unit.size(), unit.data());
      expected.insert(expected.end(), unit.begin(), unit.end());
    }
    EXPECT_EQ(trainer.engine().gather_all_params(), expected);
    const StepResult step = trainer.train_step(0);
    EXPECT_TRUE(std::isfinite(step.loss));
    EXPECT_GT(step.loss, 0);
    saved = trainer.save_checkpoint(1);
  }
  EXPECT_EQ(config_to_toml(checkpoint_read_config(saved)), config_to_toml(config));
  {
    Trainer resumed(finetune(kFinetune, overrides), comm_world());
    EXPECT_EQ(resumed.start_step(), 1);
  }
  // With the download gone, the run's resolved config resumes it on its own.
  const std::string gone = dir.file("gone");
  fs::copy(checkpoint, gone);
  std::vector<std::string> from_gone = overrides;
  from_gone[0] = "model.init_from=" + gone;
  const std::string resolved = dir.file("config.toml");
  std::ofstream(resolved) << config_to_toml(finetune(kFinetune, from_gone));
  fs::remove_all(gone);
  EXPECT_CONTAINS(error_of([&] { config_load(resolved, {}, hf_import_architecture); }),
                  "model.init_from = '" + gone + "': no such file or directory");
  Trainer alone(config_load(resolved, {"model.init_from="}, hf_import_architecture), comm_world());
  EXPECT_EQ(alone.start_step(), 1);
}

TEST(HfArchitecture, FineTuneTrainsAndResumes) {
  expect_finetune_trains_and_resumes("test/data/hf_tiny_qwen3");
}

// Qwen2.5's kind: q, k and v biases, and no head_dim key, from config.json alone.
TEST(HfArchitecture, Qwen2FineTuneTrainsAndResumes) {
  expect_finetune_trains_and_resumes("test/data/hf_tiny_qwen2");
}

// Llama 3.2's kind: tied embeddings and Llama 3.1's RoPE scaling, from
// config.json alone.
TEST(HfArchitecture, Llama32FineTuneTrainsAndResumes) {
  expect_finetune_trains_and_resumes("test/data/hf_tiny_llama32");
}

// Shipped fine-tuning configs: no architecture of their own; with a checkpoint
// they validate, and without one the error names the checkpoint they expect.
TEST(HfArchitecture, ShippedFinetuneConfigsTakeTheCheckpointsArchitecture) {
  int configs = 0;
  for (const auto& entry : fs::directory_iterator("configs/finetune")) {
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    ++configs;
    const Config as_shipped = config_load(path, {"model.init_from=test/data/hf_tiny_llama"});
    EXPECT_FALSE(as_shipped.model.init_from.empty());
    for (const std::string& key : as_shipped.file_keys)
      EXPECT_TRUE(!key.starts_with("model.") || key == "model.init_from") << key;
    const Config c =
        config_load(path, {"model.init_from=test/data/hf_tiny_llama"}, hf_import_architecture);
    expect_model_is(c.model, read_json("test/data/hf_tiny_llama/config.json"));
    const Config shipped = config_load(path, {});
    if (!fs::exists(shipped.model.init_from)) {  // not downloaded here
      EXPECT_CONTAINS(error_of([&] { config_load(path, {}, hf_import_architecture); }),
                      path + ": model.init_from = '" + shipped.model.init_from +
                          "': no such file or directory");
    }
  }
  EXPECT_GE(configs, 7);
}

}  // namespace
}  // namespace llm
