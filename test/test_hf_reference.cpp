// Our forward against transformers itself: test/data/hf_tiny_llama holds a tiny
// LlamaForCausalLM saved by save_pretrained and its fp32 logits on fixed
// tokens (tools/make_hf_reference.py made them; running this test needs
// neither torch nor transformers). Importing those files and running our
// forward must reproduce every logit, which pins the Hugging Face semantics
// (q/k/v and gate/up splits, RoPE layout, GQA grouping, RMSNorm, untied head)
// independently of our own export/import round trip. The exported config.json
// must use transformers' key names.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "interop/hf_llama.h"
#include "model/transformer.h"
#include "parallel/sharding_engine.h"
#include "parallel/topology.h"
#include "test/temp_dir.h"
#include "trainer/hf_weights_source.h"

namespace llm {
namespace {

constexpr char kReferenceDir[] = "test/data/hf_tiny_llama";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  return nlohmann::json::parse(in);
}

// The model described by the reference's config.json, loaded from its weights.
struct ImportedModel {
  Config config;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<Topology> topology;
  std::unique_ptr<ShardingEngine> engine;

  ImportedModel(int B, int T) {
    config.path = kReferenceDir;
    config.data.train = "unused";
    config.model = hf_read_config(kReferenceDir);
    model = Transformer::create(config.model, B, T, backend_cpu());
    topology = std::make_unique<Topology>(comm_world(), config.parallel);
    engine = std::make_unique<ShardingEngine>(model->layout(), config, backend_cpu(), *topology);
    HfWeights weights = HfWeights::open(kReferenceDir, config.model, model->layout());
    HfWeightsSource source(weights);
    engine->load_state(source, /*with_moments=*/false);
  }
};

// Every logit within 2e-5 + 2e-5 * |logit| of transformers' (both fp32; the
// logits are O(1) and the two differ only in summation order), and our loss
// equals the cross-entropy of the reference logits.
TEST(HfReference, LogitsMatchTransformers) {
  const nlohmann::json reference = read_json(std::string(kReferenceDir) + "/reference_logits.json");
  const int B = reference["batch"], T = reference["seq_len"];
  const std::vector<int32_t> tokens = reference["tokens"].get<std::vector<int32_t>>();
  const std::vector<double> expected = reference["logits"].get<std::vector<double>>();
  ImportedModel imported(B, T);
  const int V = imported.config.model.vocab_size;
  ASSERT_EQ(tokens.size(), static_cast<size_t>(B * T));
  ASSERT_EQ(expected.size(), static_cast<size_t>(B * T * V));

  // Targets: the next token of each row (the last one wraps), so the loss is a real one.
  std::vector<int32_t> targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) targets[i] = tokens[(i + 1) % tokens.size()];
  const float loss = imported.model->forward(*imported.engine, tokens.data(), targets.data(), B, T);

  std::vector<float> row(V);
  double max_error = 0, reference_loss = 0;
  for (int r = 0; r < B * T; ++r) {
    imported.model->logits_row(r, row.data());
    double max_logit = -INFINITY;
    for (int v = 0; v < V; ++v) {
      const double want = expected[(size_t)r * V + v];
      ASSERT_NEAR(row[v], want, 2e-5 + 2e-5 * std::abs(want)) << "row " << r << ", token " << v;
      max_error = std::max(max_error, std::abs(row[v] - want));
      max_logit = std::max(max_logit, want);
    }
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(expected[(size_t)r * V + v] - max_logit);
    reference_loss += std::log(sum) + max_logit - expected[(size_t)r * V + targets[r]];
  }
  reference_loss /= B * T;
  EXPECT_NEAR(loss, reference_loss, 1e-5 * reference_loss);
  // The logits are not trivially small: an all-zero forward could not pass.
  double spread = 0;
  for (double v : expected) spread = std::max(spread, std::abs(v));
  EXPECT_GT(spread, 1.0);
  std::printf("max |logit - transformers| = %.3g over %d rows\n", max_error, B * T);
}

// Keys that define the architecture: ours must carry each with transformers' value.
constexpr const char* kArchitectureKeys[] = {
    "architectures",     "model_type",          "hidden_size",         "intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
    "rms_norm_eps",      "rope_theta",          "tie_word_embeddings", "hidden_act",
};

TEST(HfReference, ExportedConfigUsesTransformersKeyNames) {
  const nlohmann::json theirs = read_json(std::string(kReferenceDir) + "/config.json");
  ImportedModel imported(1, 4);
  test_support::TempDir dir("llm_test_hf_reference_");
  const std::vector<float> params = imported.engine->gather_all_params();
  hf_export(imported.config.model, imported.model->layout(), params.data(), dir.str(), {});
  const nlohmann::json ours = read_json(dir.file("config.json"));

  // A misspelt key is one transformers does not write (and would silently ignore).
  for (const auto& [key, value] : ours.items()) {
    EXPECT_TRUE(theirs.contains(key))
        << "exported config.json key '" << key << "' is not one transformers writes";
  }
  for (const char* key : kArchitectureKeys) {
    ASSERT_TRUE(theirs.contains(key)) << "reference lacks " << key;
    ASSERT_TRUE(ours.contains(key)) << "exported config.json lacks '" << key << "'";
    if (theirs[key].is_number_float()) {
      EXPECT_DOUBLE_EQ(ours[key].get<double>(), theirs[key].get<double>()) << key;
    } else {
      EXPECT_EQ(ours[key], theirs[key]) << key;
    }
  }
}

}  // namespace
}  // namespace llm
