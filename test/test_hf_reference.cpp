// Our forward against transformers itself: test/data/hf_tiny_llama holds a
// tiny LlamaForCausalLM, hf_tiny_llama32 one as Llama 3.2 is (tied
// embeddings, Llama 3.1's RoPE scaling), test/data/hf_tiny_qwen2 a tiny
// Qwen2ForCausalLM as Qwen2.5 is (q, k and v biases, tied embeddings, no
// head_dim key), test/data/hf_tiny_qwen3 a tiny Qwen3ForCausalLM (QK-norm,
// tied embeddings, RoPE theta 1e6), each saved by save_pretrained
// with its fp32 logits on fixed tokens and its greedy continuation of a
// prompt (tools/make_hf_reference.py made them; running this test needs
// neither torch nor transformers). Importing those files and running our
// forward must reproduce every logit and our generation every greedy token,
// which pins the Hugging Face semantics (q/k/v and gate/up splits, RoPE
// layout, GQA grouping, RMSNorm, q/k norms, q/k/v biases, tied or untied head)
// independently of our own export/import round trip. The exported config.json
// must use transformers' key names and values, and the exported tensors be
// transformers' own, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "interop/hf_llama.h"
#include "interop/safetensors.h"
#include "model/generate.h"
#include "model/transformer.h"
#include "parallel/sharding_engine.h"
#include "parallel/topology.h"
#include "test/temp_dir.h"
#include "trainer/hf_weights_source.h"

namespace llm {
namespace {

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

  ImportedModel(const std::string& dir, int B, int T) {
    config.path = dir;
    config.data.train = "unused";
    config.model = hf_read_config(dir);
    model = Transformer::create(config.model, B, T, backend_cpu());
    topology = std::make_unique<Topology>(comm_world(), config.parallel);
    engine = std::make_unique<ShardingEngine>(model->layout(), config, backend_cpu(), *topology);
    HfWeights weights = HfWeights::open(dir, config.model, model->layout());
    HfWeightsSource source(weights);
    engine->load_state(source, /*with_moments=*/false);
  }
};

// One reference directory and what its model is.
struct Reference {
  const char* name;
  const char* dir;
  bool qk_norm;
  bool qkv_bias;
  bool tie_embeddings;
  bool rope_scaling;
};

void PrintTo(const Reference& reference, std::ostream* os) { *os << reference.dir; }

class HfReference : public testing::TestWithParam<Reference> {
 protected:
  std::string dir() const { return GetParam().dir; }
  nlohmann::json reference() const { return read_json(dir() + "/reference_logits.json"); }
};

INSTANTIATE_TEST_SUITE_P(
    Architectures, HfReference,
    testing::Values(Reference{"llama", "test/data/hf_tiny_llama", false, false, false, false},
                    Reference{"llama32", "test/data/hf_tiny_llama32", false, false, true, true},
                    Reference{"qwen2", "test/data/hf_tiny_qwen2", false, true, true, false},
                    Reference{"qwen3", "test/data/hf_tiny_qwen3", true, false, true, false}),
    [](const testing::TestParamInfo<Reference>& info) { return std::string(info.param.name); });

// The config.json reads as the architecture it is.
TEST_P(HfReference, ConfigReadsAsItsArchitecture) {
  const ModelConfig c = hf_read_config(dir());
  EXPECT_EQ(c.qk_norm, GetParam().qk_norm);
  EXPECT_EQ(c.qkv_bias, GetParam().qkv_bias);
  EXPECT_EQ(c.tie_embeddings, GetParam().tie_embeddings);
  EXPECT_EQ(c.rope_scaling_factor != 1, GetParam().rope_scaling);
}

// Every logit within 2e-5 + 2e-5 * |logit| of transformers' (both fp32; the
// logits are O(1) and the two differ only in summation order), and our loss
// equals the cross-entropy of the reference logits.
TEST_P(HfReference, LogitsMatchTransformers) {
  const nlohmann::json reference = this->reference();
  const int B = reference["batch"], T = reference["seq_len"];
  const std::vector<int32_t> tokens = reference["tokens"].get<std::vector<int32_t>>();
  const std::vector<double> expected = reference["logits"].get<std::vector<double>>();
  ImportedModel imported(dir(), B, T);
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
    imported.model->logits_row(*imported.engine, r, row.data());
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

// Greedy generation equals transformers' generate(do_sample=False) token for
// token. Each token is an argmax, so a wrong one shows as soon as one logit
// is off by more than the gap between the top two.
TEST_P(HfReference, GreedyGenerationMatchesTransformers) {
  const nlohmann::json reference = this->reference();
  ASSERT_TRUE(reference.contains("greedy")) << dir();
  const std::vector<int32_t> prompt = reference["prompt"].get<std::vector<int32_t>>();
  const std::vector<int32_t> expected = reference["greedy"].get<std::vector<int32_t>>();
  const int length = static_cast<int>(prompt.size() + expected.size());
  ImportedModel imported(dir(), 1, length);
  imported.model->reserve_kv_cache(1, length);
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = static_cast<int>(expected.size());
  const std::vector<std::vector<int32_t>> ours =
      generate(*imported.model, *imported.engine, prompt, 1, greedy);
  ASSERT_EQ(ours.size(), 1u);
  EXPECT_EQ(ours[0], expected);
}

// Keys that define the architecture: ours must carry each the reference has,
// with transformers' value (Qwen2's config has no head_dim).
constexpr const char* kArchitectureKeys[] = {
    "architectures",     "model_type",          "hidden_size",         "intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
    "rms_norm_eps",      "rope_theta",          "tie_word_embeddings", "hidden_act",
    "head_dim",
};

TEST_P(HfReference, ExportedConfigUsesTransformersKeyNames) {
  const nlohmann::json theirs = read_json(dir() + "/config.json");
  ImportedModel imported(dir(), 1, 4);
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
    if (!theirs.contains(key)) continue;  // and ours lacks it too: checked above
    ASSERT_TRUE(ours.contains(key)) << "exported config.json lacks '" << key << "'";
    if (theirs[key].is_number_float()) {
      EXPECT_DOUBLE_EQ(ours[key].get<double>(), theirs[key].get<double>()) << key;
    } else {
      EXPECT_EQ(ours[key], theirs[key]) << key;
    }
  }
  if (GetParam().rope_scaling) {
    EXPECT_EQ(ours["rope_scaling"], theirs["rope_scaling"]);
  }
}

// Imported and exported again, every tensor is transformers' own: the same
// names, shapes and dtype, and the same bits.
TEST_P(HfReference, ExportGivesBackTheSameTensors) {
  ImportedModel imported(dir(), 1, 4);
  test_support::TempDir out("llm_test_hf_reference_");
  const std::vector<float> params = imported.engine->gather_all_params();
  hf_export(imported.config.model, imported.model->layout(), params.data(), out.str(), {});
  const SafetensorsFile theirs = SafetensorsFile::open(dir() + "/model.safetensors");
  const SafetensorsFile ours = SafetensorsFile::open(out.file("model.safetensors"));
  std::vector<std::string> their_names = theirs.names(), our_names = ours.names();
  std::sort(their_names.begin(), their_names.end());
  std::sort(our_names.begin(), our_names.end());
  ASSERT_EQ(our_names, their_names);
  for (const std::string& name : their_names) {
    const TensorInfo &want = theirs.info(name), &got = ours.info(name);
    EXPECT_EQ(got.dtype, want.dtype) << name;
    ASSERT_EQ(got.shape, want.shape) << name;
    std::vector<float> a(want.numel), b(got.numel);
    theirs.read_f32(name, 0, a.size(), a.data());
    ours.read_f32(name, 0, b.size(), b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << name;
  }
}

}  // namespace
}  // namespace llm
