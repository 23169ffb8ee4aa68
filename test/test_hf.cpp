// Hugging Face interop: the safetensors reader/writer (round trips, the bytes
// on disk, every kind of corrupt file), the Llama name/shape mapping (fused
// tensors split by rows), export -> import reproducing every parameter, and
// config.json in both directions. Every error must name its file.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <tuple>

#include "base/bf16.h"
#include "base/error.h"
#include "interop/hf_llama.h"
#include "interop/safetensors.h"
#include "test/temp_dir.h"
#include "test/error_of.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

using test_support::TempDir;
// Each test's scratch directory is <temp>/llm_test_hf_<pid>_<n>.
constexpr char kTempPrefix[] = "llm_test_hf_";

using test_support::error_of;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A safetensors file by hand: u64 length, header text, data bytes.
std::string raw_safetensors(const std::string& header, const std::string& data,
                            uint64_t length_field) {
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &length_field, 8);
  return bytes + header + data;
}
std::string raw_safetensors(const std::string& header, const std::string& data) {
  return raw_safetensors(header, data, header.size());
}

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// ---- safetensors --------------------------------------------------------------

TEST(Safetensors, RoundTripF32IsExact) {
  TempDir dir(kTempPrefix);
  std::vector<float> a = random_floats(15, 1), b = random_floats(7, 2);
  a[3] = std::numeric_limits<float>::infinity();
  a[4] = -0.0f;
  a[5] = std::numeric_limits<float>::denorm_min();
  SafetensorsWriter writer;
  writer.add("a", {3, 5}, a.data(), Dtype::f32);
  writer.add("empty", {0, 4}, nullptr, Dtype::f32);
  writer.add("b", {7}, b.data(), Dtype::f32);
  writer.set_metadata("format", "pt");
  writer.write(dir.file("x.safetensors"));
  EXPECT_FALSE(fs::exists(dir.file("x.safetensors.tmp")));

  SafetensorsFile file = SafetensorsFile::open(dir.file("x.safetensors"));
  EXPECT_EQ(file.names(), (std::vector<std::string>{"a", "empty", "b"}));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.info("a").shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(file.info("a").dtype, Dtype::f32);
  EXPECT_EQ(file.info("empty").numel, 0u);
  EXPECT_FALSE(file.has("c"));

  std::vector<float> out(15);
  file.read_f32("a", 0, 15, out.data());
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(bits_of(out[i]), bits_of(a[i])) << i;
  file.read_f32("b", 2, 4, out.data());  // a sub-range
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(bits_of(out[i]), bits_of(b[2 + i])) << i;
}

TEST(Safetensors, RoundTripBf16RoundsLikeFloatToBf16) {
  TempDir dir(kTempPrefix);
  std::vector<float> values = random_floats(64, 3);
  values[0] = std::bit_cast<float>(0x3F808000u);  // a tie: rounds to even (down)
  values[1] = std::bit_cast<float>(0x3F818000u);  // a tie: rounds to even (up)
  values[2] = std::numeric_limits<float>::max();  // overflows to inf
  values[3] = -std::numeric_limits<float>::infinity();
  SafetensorsWriter writer;
  writer.add("w", {8, 8}, values.data(), Dtype::bf16);
  writer.write(dir.file("w.safetensors"));

  SafetensorsFile file = SafetensorsFile::open(dir.file("w.safetensors"));
  EXPECT_EQ(file.info("w").dtype, Dtype::bf16);
  EXPECT_EQ(file.info("w").data_end - file.info("w").data_begin, 64u * 2);
  std::vector<float> out(64);
  file.read_f32("w", 0, 64, out.data());
  for (size_t i = 0; i < 64; ++i) {
    EXPECT_EQ(bits_of(out[i]), bits_of(bf16_to_float(float_to_bf16(values[i])))) << i;
  }
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_TRUE(std::isinf(out[2]));
}

TEST(Safetensors, HeaderOnDiskIsPaddedJsonWithContiguousOffsets) {
  TempDir dir(kTempPrefix);
  std::vector<float> a = random_floats(3, 4), b = random_floats(6, 5);
  SafetensorsWriter writer;
  writer.add("a", {3}, a.data(), Dtype::f32);
  writer.add("b", {2, 3}, b.data(), Dtype::bf16);
  writer.set_metadata("format", "pt");
  writer.write(dir.file("h.safetensors"));

  const std::string bytes = read_bytes(dir.file("h.safetensors"));
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "data must start 8-byte aligned";
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}')) << "only spaces pad the JSON";
  const nlohmann::json json = nlohmann::json::parse(header);
  EXPECT_EQ(json["__metadata__"]["format"], "pt");
  EXPECT_EQ(json["a"]["dtype"], "F32");
  EXPECT_EQ(json["a"]["shape"], nlohmann::json({3}));
  EXPECT_EQ(json["a"]["data_offsets"], nlohmann::json({0, 12}));
  EXPECT_EQ(json["b"]["dtype"], "BF16");
  EXPECT_EQ(json["b"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(json["b"]["data_offsets"], nlohmann::json({12, 24}));
  EXPECT_EQ(bytes.size(), 8 + n + 24);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n, a.data(), 12), 0);
  uint16_t first_b = 0;
  std::memcpy(&first_b, bytes.data() + 8 + n + 12, 2);
  EXPECT_EQ(first_b, float_to_bf16(b[0]));
}

TEST(Safetensors, ReadsF16ConvertingEveryKindOfValue) {
  TempDir dir(kTempPrefix);
  const std::vector<std::pair<uint16_t, float>> cases = {
      {0x3C00, 1.0f},        {0xC000, -2.0f},    {0x3555, 0.333251953125f},
      {0x7BFF, 65504.0f},    {0x0400, 0x1p-14f}, {0x0001, 0x1p-24f},
      {0x83FF, -0x3FFp-24f}, {0x8000, -0.0f},    {0x7C00, INFINITY}};
  std::string data;
  for (auto [half, value] : cases) data.append(reinterpret_cast<const char*>(&half), 2);
  const uint16_t nan = 0x7E00;
  data.append(reinterpret_cast<const char*>(&nan), 2);
  const std::string header = R"({"h":{"dtype":"F16","shape":[10],"data_offsets":[0,20]}})";
  write_bytes(dir.file("h.safetensors"), raw_safetensors(header, data));

  SafetensorsFile file = SafetensorsFile::open(dir.file("h.safetensors"));
  std::vector<float> out(10);
  file.read_f32("h", 0, 10, out.data());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(bits_of(out[i]), bits_of(cases[i].second)) << "half 0x" << std::hex << cases[i].first;
  }
  EXPECT_TRUE(std::isnan(out[9]));
}

TEST(Safetensors, CorruptFilesAreErrorsNamingTheFile) {
  TempDir dir(kTempPrefix);
  const std::string f32_16 = R"("dtype":"F32","shape":[2,2],"data_offsets":[0,16])";
  const std::string sixteen(16, 'x');
  struct Case {
    const char* label;
    std::string bytes;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"shorter than the length", "abc", "smaller than the 8-byte header length"},
      {"header length beyond file", raw_safetensors("{}", "", 1000), "runs past the end"},
      {"bad json", raw_safetensors(R"({"a": {"dtype": )", ""), "not valid JSON"},
      {"not an object", raw_safetensors("[1, 2]", ""), "not a JSON object"},
      {"unknown dtype",
       raw_safetensors(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", "xx"),
       "unknown dtype 'Q4'"},
      {"offsets not matching shape",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})",
                       "123456789012"),
       "needs 16 bytes"},
      {"negative dim",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""),
       "not a non-negative integer"},
      {"overlapping offsets",
       raw_safetensors(
           "{\"a\":{" + f32_16 + R"(},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
           std::string(24, 'x')),
       "overlap"},
      {"gap between tensors",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "12345678"),
       "gap of 4"},
      {"truncated data", raw_safetensors("{\"a\":{" + f32_16 + "}}", "12345678"), "truncated"},
      {"trailing bytes", raw_safetensors("{\"a\":{" + f32_16 + "}}", sixteen + "!"),
       "1 trailing bytes"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file(std::string(c.label) + ".safetensors");
    write_bytes(path, c.bytes);
    const std::string message = error_of([&] { SafetensorsFile::open(path); });
    EXPECT_CONTAINS(message, path) << c.label;
    EXPECT_CONTAINS(message, c.message) << c.label;
  }
}

TEST(Safetensors, BadReadsAndWritesAreErrors) {
  TempDir dir(kTempPrefix);
  std::vector<float> a(6, 1.0f);
  SafetensorsWriter writer;
  writer.add("a", {2, 3}, a.data(), Dtype::f32);
  EXPECT_CONTAINS(error_of([&] { writer.add("a", {6}, a.data(), Dtype::f32); }), "added twice");
  EXPECT_CONTAINS(error_of([&] { writer.add("h", {6}, a.data(), Dtype::f16); }),
                  "only F32 and BF16");
  writer.write(dir.file("a.safetensors"));

  SafetensorsFile file = SafetensorsFile::open(dir.file("a.safetensors"));
  float out[8];
  std::string message = error_of([&] { file.read_f32("a", 4, 3, out); });
  EXPECT_CONTAINS(message, dir.file("a.safetensors"));
  EXPECT_CONTAINS(message, "elements [4, 7) outside its 6 elements");
  message = error_of([&] { file.info("nope"); });
  EXPECT_CONTAINS(message, dir.file("a.safetensors"));
  EXPECT_CONTAINS(message, "'nope'");
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile::open(dir.file("missing.safetensors")); }),
                  dir.file("missing.safetensors"));
}

// ---- the Llama mapping --------------------------------------------------------

ModelConfig tiny_model(bool tied, bool qk_norm = false, int head_dim = 0, bool qkv_bias = false) {
  ModelConfig c;
  c.qk_norm = qk_norm;    // exported as Qwen3
  c.qkv_bias = qkv_bias;  // exported as Qwen2
  c.head_dim = head_dim;
  c.dim = 16;
  c.n_layers = 2;
  c.n_heads = 4;  // head_dim 4 unless given
  c.n_kv_heads = 2;
  c.ffn_dim = 24;
  c.vocab_size = 40;
  c.rope_theta = 500000.0;
  c.norm_eps = 1e-6;
  c.tie_embeddings = tied;
  c.init_std = 0.05;
  return c;
}

// A model with distinct random parameters, so any misplaced element shows.
struct TinyModel {
  ModelConfig config;
  ParameterLayout layout;
  std::vector<float> params;  // all units concatenated
  std::vector<size_t> unit_begin;

  explicit TinyModel(bool tied, bool qk_norm = false, int head_dim = 0, bool qkv_bias = false)
      : config(tiny_model(tied, qk_norm, head_dim, qkv_bias)), layout(layout_build(config)) {
    params = random_floats(layout.total_numel, tied ? 11 : 12);
    size_t begin = 0;
    for (const UnitSpec& u : layout.units) {
      unit_begin.push_back(begin);
      begin += u.numel;
    }
  }
  // Row r of our tensor `name`, as a vector.
  std::vector<float> row(const std::string& name, int64_t r) const {
    const TensorSpec& t = layout.tensors[layout.find(name)];
    const float* p = params.data() + unit_begin[t.unit] + t.offset + r * t.shape[1];
    return std::vector<float>(p, p + t.shape[1]);
  }
};

// Every unit of `model`'s layout read through HfWeights from `path`, in unit order.
std::vector<float> read_whole_model(const std::string& path, const TinyModel& model) {
  HfWeights weights = HfWeights::open(path, model.config, model.layout);
  std::vector<float> all(model.layout.total_numel);
  for (size_t u = 0; u < model.layout.units.size(); ++u) {
    weights.read(static_cast<int>(u), 0, model.layout.units[u].numel,
                 all.data() + model.unit_begin[u]);
  }
  return all;
}

std::vector<float> hf_row(const SafetensorsFile& file, const std::string& name, int64_t r) {
  const int64_t cols = file.info(name).shape.at(1);
  std::vector<float> out(cols);
  file.read_f32(name, r * cols, cols, out.data());
  return out;
}

void expect_export_round_trips(bool tied, bool qk_norm = false, int head_dim = 0,
                               bool qkv_bias = false) {
  TempDir dir(kTempPrefix);
  TinyModel model(tied, qk_norm, head_dim, qkv_bias);
  hf_export(model.config, model.layout, model.params.data(), dir.file("hf"), {});

  SafetensorsFile file = SafetensorsFile::open(dir.file("hf/model.safetensors"));
  std::set<std::string> names;
  for (const std::string& n : file.names()) names.insert(n);
  EXPECT_EQ(names.size(), 2 + (9 + (qk_norm ? 2 : 0) + (qkv_bias ? 3 : 0)) * 2 + (tied ? 0 : 1));
  EXPECT_EQ(names.count("model.layers.1.self_attn.q_norm.weight"), qk_norm ? 1u : 0u);
  EXPECT_EQ(names.count("model.layers.1.self_attn.k_norm.weight"), qk_norm ? 1u : 0u);
  for (const char* bias : {"q_proj.bias", "k_proj.bias", "v_proj.bias"})
    EXPECT_EQ(names.count(std::string("model.layers.1.self_attn.") + bias), qkv_bias ? 1u : 0u);
  EXPECT_EQ(names.count("lm_head.weight"), tied ? 0u : 1u);
  EXPECT_EQ(file.metadata().at("format"), "pt");

  HfWeights weights = HfWeights::open(dir.file("hf"), model.config, model.layout);
  for (size_t u = 0; u < model.layout.units.size(); ++u) {
    const size_t numel = model.layout.units[u].numel;
    std::vector<float> out(numel, NAN);
    weights.read(static_cast<int>(u), 0, numel, out.data());
    EXPECT_EQ(std::memcmp(out.data(), model.params.data() + model.unit_begin[u], numel * 4), 0)
        << "unit " << model.layout.units[u].name;
  }
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int unit = static_cast<int>(rng() % model.layout.units.size());
    const size_t numel = model.layout.units[unit].numel;
    const size_t begin = rng() % numel, count = rng() % (numel - begin + 1);
    std::vector<float> out(count, NAN);
    weights.read(unit, begin, count, out.data());
    EXPECT_EQ(
        std::memcmp(out.data(), model.params.data() + model.unit_begin[unit] + begin, count * 4), 0)
        << "unit " << unit << " [" << begin << ", +" << count << ")";
  }
}

TEST(HfExport, TiedModelRoundTripsExactly) { expect_export_round_trips(true); }
TEST(HfExport, UntiedModelRoundTripsExactly) { expect_export_round_trips(false); }
// Qwen2's q, k and v biases: three HF vectors stacked in one of ours.
TEST(HfExport, QkvBiasModelRoundTripsExactly) {
  expect_export_round_trips(true, false, 0, true);
  expect_export_round_trips(false, false, 8, true);
}
TEST(HfExport, QkNormModelRoundTripsExactly) {
  expect_export_round_trips(true, true);
  expect_export_round_trips(false, true);
}
// Heads twice as wide as dim / n_heads (4 x 8 over dim 16), as Qwen3-0.6B's.
TEST(HfExport, HeadDimApartFromDimRoundTripsExactly) {
  expect_export_round_trips(true, true, 8);
  expect_export_round_trips(false, false, 8);
}

TEST(HfExport, FusedTensorsSplitByRows) {
  TempDir dir(kTempPrefix);
  TinyModel model(false);
  hf_export(model.config, model.layout, model.params.data(), dir.str(), {});
  SafetensorsFile file = SafetensorsFile::open(dir.file("model.safetensors"));
  const int64_t C = 16, HD = 4 * 4, KVD = 2 * 4, F = 24;
  const std::string hf = "model.layers.1.";
  EXPECT_EQ(file.info(hf + "self_attn.q_proj.weight").shape, (std::vector<int64_t>{HD, C}));
  EXPECT_EQ(file.info(hf + "self_attn.k_proj.weight").shape, (std::vector<int64_t>{KVD, C}));
  EXPECT_EQ(file.info(hf + "self_attn.v_proj.weight").shape, (std::vector<int64_t>{KVD, C}));
  EXPECT_EQ(file.info(hf + "self_attn.o_proj.weight").shape, (std::vector<int64_t>{C, HD}));
  EXPECT_EQ(file.info(hf + "mlp.gate_proj.weight").shape, (std::vector<int64_t>{F, C}));
  EXPECT_EQ(file.info(hf + "mlp.up_proj.weight").shape, (std::vector<int64_t>{F, C}));
  EXPECT_EQ(file.info(hf + "mlp.down_proj.weight").shape, (std::vector<int64_t>{C, F}));
  EXPECT_EQ(file.info(hf + "input_layernorm.weight").shape, (std::vector<int64_t>{C}));
  EXPECT_EQ(file.info("lm_head.weight").shape, (std::vector<int64_t>{40, C}));

  for (int64_t r : {int64_t{0}, int64_t{3}, KVD - 1}) {
    EXPECT_EQ(hf_row(file, hf + "self_attn.q_proj.weight", r), model.row("layers.1.attn.wqkv", r));
    EXPECT_EQ(hf_row(file, hf + "self_attn.k_proj.weight", r),
              model.row("layers.1.attn.wqkv", HD + r));
    EXPECT_EQ(hf_row(file, hf + "self_attn.v_proj.weight", r),
              model.row("layers.1.attn.wqkv", HD + KVD + r));
    EXPECT_EQ(hf_row(file, hf + "mlp.gate_proj.weight", r), model.row("layers.1.mlp.w13", r));
    EXPECT_EQ(hf_row(file, hf + "mlp.up_proj.weight", r), model.row("layers.1.mlp.w13", F + r));
    EXPECT_EQ(hf_row(file, hf + "mlp.down_proj.weight", r), model.row("layers.1.mlp.w2", r));
    EXPECT_EQ(hf_row(file, "model.embed_tokens.weight", r), model.row("embed.weight", r));
    EXPECT_EQ(hf_row(file, "lm_head.weight", r), model.row("lm_head.weight", r));
  }
}

TEST(HfExport, Bfloat16ExportRoundsEveryParameter) {
  TempDir dir(kTempPrefix);
  TinyModel model(true);
  HfExportOptions options;
  options.dtype = "bfloat16";
  hf_export(model.config, model.layout, model.params.data(), dir.str(), options);
  EXPECT_EQ(SafetensorsFile::open(dir.file("model.safetensors")).info("model.norm.weight").dtype,
            Dtype::bf16);
  HfWeights weights = HfWeights::open(dir.str(), model.config, model.layout);
  const int unit = model.layout.block_unit(0);
  std::vector<float> out(model.layout.units[unit].numel);
  weights.read(unit, 0, out.size(), out.data());
  for (size_t i = 0; i < out.size(); ++i) {
    const float expected = bf16_to_float(float_to_bf16(model.params[model.unit_begin[unit] + i]));
    ASSERT_EQ(bits_of(out[i]), bits_of(expected)) << i;
  }
  options.dtype = "float16";
  EXPECT_CONTAINS(error_of([&] {
                    hf_export(model.config, model.layout, model.params.data(), dir.str(), options);
                  }),
                  "'float16'");
}

// ---- config.json --------------------------------------------------------------

TEST(HfConfig, ExportedConfigReadsBack) {
  TempDir dir(kTempPrefix);
  for (bool tied : {true, false}) {
    TinyModel model(tied);
    HfExportOptions options;
    options.max_position_embeddings = 512;
    hf_export(model.config, model.layout, model.params.data(), dir.str(), options);
    const ModelConfig back = hf_read_config(dir.str());
    EXPECT_EQ(hf_read_context_length(dir.str()), 512);
    EXPECT_EQ(back.dim, model.config.dim);
    EXPECT_EQ(back.n_layers, model.config.n_layers);
    EXPECT_EQ(back.n_heads, model.config.n_heads);
    EXPECT_EQ(back.n_kv_heads, model.config.n_kv_heads);
    EXPECT_EQ(back.ffn_dim, model.config.ffn_dim);
    EXPECT_EQ(back.vocab_size, model.config.vocab_size);
    EXPECT_EQ(back.rope_theta, model.config.rope_theta);
    EXPECT_EQ(back.norm_eps, model.config.norm_eps);
    EXPECT_EQ(back.tie_embeddings, tied);
    EXPECT_EQ(back.init_std, model.config.init_std);
  }
  const nlohmann::json json = nlohmann::json::parse(read_bytes(dir.file("config.json")));
  EXPECT_EQ(json["architectures"], nlohmann::json({"LlamaForCausalLM"}));
  EXPECT_EQ(json["model_type"], "llama");
  EXPECT_EQ(json["head_dim"], 4);
  EXPECT_EQ(json["hidden_act"], "silu");
  EXPECT_EQ(json["attention_bias"], false);
  EXPECT_EQ(json["mlp_bias"], false);
  EXPECT_EQ(json["torch_dtype"], "float32");
  EXPECT_EQ(json["max_position_embeddings"], 512);
  EXPECT_EQ(json["bos_token_id"], 1);
  EXPECT_EQ(json["eos_token_id"], 2);
  EXPECT_FALSE(fs::exists(dir.file("config.json.tmp")));
}

// A model with QK-norm is a Qwen3ForCausalLM: its own keys, full attention
// in every layer, no LlamaConfig-only key; it reads back with QK-norm.
TEST(HfConfig, QkNormModelExportsAsQwen3) {
  TempDir dir(kTempPrefix);
  TinyModel model(true, true);
  hf_export(model.config, model.layout, model.params.data(), dir.str(), {});
  EXPECT_TRUE(hf_read_config(dir.str()).qk_norm);
  const nlohmann::json json = nlohmann::json::parse(read_bytes(dir.file("config.json")));
  EXPECT_EQ(json["architectures"], nlohmann::json({"Qwen3ForCausalLM"}));
  EXPECT_EQ(json["model_type"], "qwen3");
  EXPECT_EQ(json["head_dim"], 4);
  EXPECT_EQ(json["use_sliding_window"], false);
  EXPECT_TRUE(json["sliding_window"].is_null());
  EXPECT_EQ(json["max_window_layers"], 2);
  EXPECT_FALSE(json.contains("mlp_bias"));
}

// A model with q, k and v biases is a Qwen2ForCausalLM, whose config has no
// head_dim (its heads are hidden_size / num_attention_heads wide) and no
// attention_bias (it always has the biases); heads of another width keep
// head_dim, which transformers reads. It reads back with the biases. A model
// with QK-norm too is no architecture transformers has: its export is refused.
TEST(HfConfig, QkvBiasModelExportsAsQwen2) {
  for (int head_dim : {0, 8}) {
    SCOPED_TRACE(testing::Message() << "head_dim " << head_dim);
    TempDir dir(kTempPrefix);
    TinyModel model(true, false, head_dim, true);
    hf_export(model.config, model.layout, model.params.data(), dir.str(), {});
    const ModelConfig back = hf_read_config(dir.str());
    EXPECT_TRUE(back.qkv_bias);
    EXPECT_FALSE(back.qk_norm);
    EXPECT_EQ(back.resolved_head_dim(), model.config.resolved_head_dim());
    const nlohmann::json json = nlohmann::json::parse(read_bytes(dir.file("config.json")));
    EXPECT_EQ(json["architectures"], nlohmann::json({"Qwen2ForCausalLM"}));
    EXPECT_EQ(json["model_type"], "qwen2");
    EXPECT_EQ(json.contains("head_dim"), head_dim != 0);
    EXPECT_FALSE(json.contains("attention_bias"));
    EXPECT_FALSE(json.contains("mlp_bias"));
    EXPECT_EQ(json["use_sliding_window"], false);
  }
  TempDir dir(kTempPrefix);
  TinyModel both(true, true, 0, true);
  EXPECT_CONTAINS(
      error_of([&] { hf_export(both.config, both.layout, both.params.data(), dir.str(), {}); }),
      "no Hugging Face architecture has both q, k and v biases (model.qkv_bias, qwen2) and "
      "QK-norm (model.qk_norm, qwen3)");
}

// Qwen3's config as transformers writes it: a window size kept but unused
// (use_sliding_window false), every layer full attention.
TEST(HfConfig, Qwen3ConfigReadsWithQkNorm) {
  TempDir dir(kTempPrefix);
  write_bytes(dir.file("config.json"), R"({"model_type": "qwen3", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100, "rope_theta": 1000000.0,
      "sliding_window": 4096, "use_sliding_window": false, "max_window_layers": 28,
      "layer_types": ["full_attention", "full_attention"], "tie_word_embeddings": true})");
  const ModelConfig c = hf_read_config(dir.str());
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.tie_embeddings);
}

// Qwen3's config.json names bos_token_id 151643 (<|endoftext|>), which its
// tokenizer never puts before a document: a tokenizer without BOS is held
// to eos_token_id only (or generation_config.json's); one with a BOS to both.
TEST(HfConfig, DocumentTokensOfATokenizerWithoutBosAreCheckedByEosOnly) {
  TempDir dir(kTempPrefix);
  write_bytes(dir.file("config.json"), R"({"bos_token_id": 151643, "eos_token_id": 151643})");
  EXPECT_EQ(error_of([&] { hf_check_document_tokens(dir.str(), "qwen", -1, 151643); }), "");
  EXPECT_NE(error_of([&] {
              hf_check_document_tokens(dir.str(), "qwen", -1, 151645);
            }).find("eos_token_id is 151643"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              hf_check_document_tokens(dir.str(), "llama", 128000, 151643);
            }).find("bos_token_id is 151643"),
            std::string::npos);
  // Qwen3-8B (instruct): config.json's EOS is <|im_end|>; its
  // generation_config.json lists <|endoftext|>, the documents' end, too.
  write_bytes(dir.file("config.json"), R"({"bos_token_id": 151643, "eos_token_id": 151645})");
  EXPECT_CONTAINS(error_of([&] { hf_check_document_tokens(dir.str(), "qwen", -1, 151643); }),
                  "eos_token_id is 151645 but");
  write_bytes(dir.file("generation_config.json"), R"({"eos_token_id": [151645, 151643]})");
  EXPECT_EQ(error_of([&] { hf_check_document_tokens(dir.str(), "qwen", -1, 151643); }), "");
  EXPECT_CONTAINS(error_of([&] { hf_check_document_tokens(dir.str(), "qwen", -1, 7); }),
                  "generation_config.json: [151645,151643])");
}

// head_dim apart from hidden_size / num_attention_heads (Qwen3-0.6B: 1024 /
// 16 heads of 128) is model.head_dim; Qwen3Config's absent head_dim is 128;
// one equal to the derived size leaves model.head_dim 0, as a Llama reads.
TEST(HfConfig, HeadDimApartFromTheHiddenSizeIsModelHeadDim) {
  TempDir dir(kTempPrefix);
  const std::string base = R"("intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100)";
  const std::vector<std::tuple<std::string, int, int>> cases = {
      {R"({"hidden_size": 64, "head_dim": 32, )" + base + "}", 32, 32},
      {R"({"hidden_size": 64, "model_type": "qwen3", )" + base + "}", 128, 128},
      {R"({"hidden_size": 64, "model_type": "qwen3", "head_dim": 16, )" + base + "}", 0, 16},
      {R"({"hidden_size": 64, )" + base + "}", 0, 16},
  };
  for (const auto& [text, head_dim, resolved] : cases) {
    write_bytes(dir.file("config.json"), text);
    const ModelConfig c = hf_read_config(dir.str());
    EXPECT_EQ(c.head_dim, head_dim) << text;
    EXPECT_EQ(c.resolved_head_dim(), resolved) << text;
  }
}

// A checkpoint is named by what a user sees: its directory, its config.json,
// the weights file or the sharded checkpoint's index. Each reader takes every
// form, and without a config.json beside the weights each names it, in one line.
TEST(HfConfig, EveryFormOfTheCheckpointPathIsRead) {
  TempDir dir(kTempPrefix);
  TinyModel model(false);
  HfExportOptions options;
  options.max_position_embeddings = 96;
  hf_export(model.config, model.layout, model.params.data(), dir.str(), options);
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map": {}})");
  for (const std::string& path : {dir.str(), dir.file("config.json"), dir.file("model.safetensors"),
                                  dir.file("model.safetensors.index.json")}) {
    EXPECT_EQ(hf_read_config(path).n_heads, model.config.n_heads) << path;
    EXPECT_EQ(hf_read_context_length(path), 96) << path;
    EXPECT_EQ(error_of([&] { hf_check_document_tokens(path, "tok", 1, 2); }), "") << path;
    EXPECT_CONTAINS(error_of([&] { hf_check_document_tokens(path, "tok", 1, 3); }),
                    dir.file("config.json") + ": eos_token_id is 2");
  }
  fs::remove(dir.file("config.json"));
  for (const std::string& path :
       {dir.str(), dir.file("model.safetensors"), dir.file("model.safetensors.index.json")}) {
    for (const std::string& message :
         {error_of([&] { hf_read_config(path); }), error_of([&] { hf_read_context_length(path); }),
          error_of([&] { hf_check_document_tokens(path, "tok", 1, 2); })}) {
      EXPECT_CONTAINS(message, dir.file("config.json") + ": missing");
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
  const std::string nowhere = dir.file("nowhere/model.safetensors");
  EXPECT_CONTAINS(error_of([&] { hf_read_config(nowhere); }),
                  nowhere + ": no such file or directory");
}

TEST(HfConfig, AbsentKeysTakeLlamaConfigDefaults) {
  TempDir dir(kTempPrefix);
  write_bytes(dir.file("config.json"), R"({"hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 3, "num_attention_heads": 8, "vocab_size": 100,
      "rope_parameters": {"rope_type": "default", "rope_theta": 250000.0}})");
  const ModelConfig c = hf_read_config(dir.file("config.json"));
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 250000.0);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.init_std, 0.02);
}

// Llama 3.1 and 3.2 carry RoPE scaling: as rope_scaling (transformers 4),
// or in rope_parameters beside rope_theta (transformers 5). Llama 3.1 8B's
// values.
TEST(HfConfig, Llama31RopeScalingReadsIntoTheModelKeys) {
  TempDir dir(kTempPrefix);
  const std::string sizes = R"("hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 3, "num_attention_heads": 8, "vocab_size": 100)";
  const std::string scaling = R"("factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192)";
  for (const std::string& text :
       {"{" + sizes + R"(, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", )" +
            scaling + "}}",
        "{" + sizes + R"(, "rope_theta": 500000.0, "rope_scaling": {"type": "llama3", )" + scaling +
            "}}",
        "{" + sizes + R"(, "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, )" +
            scaling + "}}"}) {
    write_bytes(dir.file("config.json"), text);
    const ModelConfig c = hf_read_config(dir.str());
    EXPECT_EQ(c.rope_theta, 500000.0) << text;
    EXPECT_EQ(c.rope_scaling_factor, 8.0) << text;
    EXPECT_EQ(c.rope_low_freq_factor, 1.0) << text;
    EXPECT_EQ(c.rope_high_freq_factor, 4.0) << text;
    EXPECT_EQ(c.rope_original_context, 8192) << text;
  }
}

// Export writes the scaling as transformers 4 spells it and reads it back;
// weights whose config.json scales otherwise than the run are refused.
TEST(HfConfig, RopeScalingExportsAndMustMatch) {
  TempDir dir(kTempPrefix);
  TinyModel model(true);
  model.config.rope_scaling_factor = 32.0;  // Llama 3.2's factor
  model.config.rope_original_context = 64;
  hf_export(model.config, model.layout, model.params.data(), dir.str(), {});
  const nlohmann::json json = nlohmann::json::parse(read_bytes(dir.file("config.json")));
  EXPECT_EQ(json["rope_scaling"],
            nlohmann::json::parse(R"({"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 64})"));
  const ModelConfig back = hf_read_config(dir.str());
  EXPECT_EQ(back.rope_scaling_factor, 32.0);
  EXPECT_EQ(back.rope_original_context, 64);
  EXPECT_NO_THROW(HfWeights::open(dir.str(), model.config, model.layout));
  ModelConfig other = model.config;
  other.rope_original_context = 8192;
  EXPECT_CONTAINS(error_of([&] { HfWeights::open(dir.str(), other, model.layout); }),
                  "rope_scaling.original_max_position_embeddings is 64 but "
                  "model.rope_original_context is 8192");
  other = model.config;
  other.rope_scaling_factor = 1.0;
  EXPECT_CONTAINS(error_of([&] { HfWeights::open(dir.str(), other, model.layout); }),
                  "rope_scaling.factor is 32.0 but model.rope_scaling_factor is 1.0");
  hf_export(other, model.layout, model.params.data(), dir.str(), {});  // unscaled: no key
  EXPECT_FALSE(nlohmann::json::parse(read_bytes(dir.file("config.json"))).contains("rope_scaling"));
}

TEST(HfConfig, UnsupportedOrBadKeysAreErrorsNamingFileAndKey) {
  TempDir dir(kTempPrefix);
  const std::string base = R"("intermediate_size": 128, "num_hidden_layers": 3,
      "num_attention_heads": 8, "vocab_size": 100)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{" + base + "}", "missing key 'hidden_size'"},
      {R"({"hidden_size": "big", )" + base + "}", "key 'hidden_size': expected a positive integer"},
      {R"({"hidden_size": 64, "rope_scaling": {"type": "linear", "factor": 2.0}, )" + base + "}",
       "key 'rope_scaling.type' is \"linear\""},
      {R"({"hidden_size": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
          "low_freq_factor": 1.0, "high_freq_factor": 4.0}, )" +
           base + "}",
       "missing key 'rope_scaling.original_max_position_embeddings'"},
      {R"({"hidden_size": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
          "low_freq_factor": 4.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}, )" +
           base + "}",
       "key 'rope_scaling.high_freq_factor' (4) is not above low_freq_factor (4)"},
      {R"({"hidden_size": 64, "attention_bias": true, )" + base + "}", "key 'attention_bias'"},
      {R"({"hidden_size": 64, "sliding_window": 4096, )" + base + "}",
       "key 'sliding_window' is 4096"},
      {R"({"hidden_size": 64, "use_sliding_window": true, )" + base + "}",
       "key 'use_sliding_window'"},
      {R"({"hidden_size": 64, "head_dim": 15, )" + base + "}", "key 'head_dim' is 15, not even"},
      {R"({"hidden_size": 60, )" + base + "}", "no 'head_dim' says the head size"},
      {R"({"hidden_size": 64, "model_type": "gpt2", )" + base + "}", "key 'model_type'"},
      {R"({"hidden_size": 64, "model_type": "qwen3", "head_dim": 8,
          "layer_types": ["full_attention", "sliding_attention", "full_attention"], )" +
           base + "}",
       "key 'layer_types[1]' is \"sliding_attention\""},
      {R"({"hidden_size": 64, "num_key_value_heads": 3, )" + base + "}", "num_key_value_heads 3"},
      {R"({"hidden_size": 64, )", "not valid JSON"},
  };
  for (const auto& [text, expected] : cases) {
    write_bytes(dir.file("config.json"), text);
    const std::string message = error_of([&] { hf_read_config(dir.str()); });
    EXPECT_CONTAINS(message, dir.file("config.json"));
    EXPECT_CONTAINS(message, expected);
  }
}

// ---- import errors and sharded checkpoints --------------------------------------

struct StoredTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

std::vector<StoredTensor> load_tensors(const std::string& path) {
  SafetensorsFile file = SafetensorsFile::open(path);
  std::vector<StoredTensor> tensors;
  for (const std::string& name : file.names()) {
    const TensorInfo& info = file.info(name);
    tensors.push_back({name, info.shape, std::vector<float>(info.numel)});
    file.read_f32(name, 0, info.numel, tensors.back().data.data());
  }
  return tensors;
}

void save_tensors(const std::string& path, const std::vector<StoredTensor>& tensors) {
  SafetensorsWriter writer;
  for (const StoredTensor& t : tensors) writer.add(t.name, t.shape, t.data.data(), Dtype::f32);
  writer.write(path);
}

// Exports `model` to dir, then lets `edit` change the stored tensors.
void export_edited(const TinyModel& model, const TempDir& dir,
                   const std::function<void(std::vector<StoredTensor>&)>& edit) {
  hf_export(model.config, model.layout, model.params.data(), dir.str(), {});
  std::vector<StoredTensor> tensors = load_tensors(dir.file("model.safetensors"));
  edit(tensors);
  save_tensors(dir.file("model.safetensors"), tensors);
}

TEST(HfWeights, MissingTensorIsAnErrorNamingIt) {
  TempDir dir(kTempPrefix);
  TinyModel model(false);
  export_edited(model, dir, [](std::vector<StoredTensor>& tensors) {
    std::erase_if(tensors, [](const StoredTensor& t) {
      return t.name == "model.layers.1.self_attn.k_proj.weight";
    });
  });
  const std::string message =
      error_of([&] { HfWeights::open(dir.str(), model.config, model.layout); });
  EXPECT_CONTAINS(message, dir.file("model.safetensors"));
  EXPECT_CONTAINS(
      message, "missing tensor 'model.layers.1.self_attn.k_proj.weight' (expected shape [8, 16])");
}

TEST(HfWeights, WrongShapeIsAnErrorNamingTensorAndShapes) {
  TempDir dir(kTempPrefix);
  TinyModel model(false);
  export_edited(model, dir, [](std::vector<StoredTensor>& tensors) {
    for (StoredTensor& t : tensors) {
      if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape = {16, 8};
    }
  });
  const std::string message =
      error_of([&] { HfWeights::open(dir.str(), model.config, model.layout); });
  EXPECT_CONTAINS(message, dir.file("model.safetensors"));
  EXPECT_CONTAINS(
      message,
      "tensor 'model.layers.0.self_attn.k_proj.weight' has shape [16, 8], expected [8, 16]");
}

TEST(HfWeights, UnexpectedTensorIsAnError) {
  TempDir dir(kTempPrefix);
  TinyModel model(true);
  export_edited(model, dir, [](std::vector<StoredTensor>& tensors) {
    tensors.push_back({"model.layers.0.self_attn.q_proj.bias", {16}, std::vector<float>(16)});
  });
  EXPECT_CONTAINS(error_of([&] { HfWeights::open(dir.str(), model.config, model.layout); }),
                  "tensor 'model.layers.0.self_attn.q_proj.bias' has no place");
}

TEST(HfWeights, ConfigJsonMustDescribeOurModel) {
  TempDir dir(kTempPrefix);
  TinyModel model(true);
  hf_export(model.config, model.layout, model.params.data(), dir.str(), {});
  ModelConfig other = model.config;
  other.n_heads = 2;  // 2 heads of 8: the same tensor shapes, another model
  other.n_kv_heads = 1;
  std::string message = error_of([&] { HfWeights::open(dir.str(), other, layout_build(other)); });
  EXPECT_CONTAINS(message, dir.file("config.json"));
  EXPECT_CONTAINS(message, "num_attention_heads is 4 but model.n_heads is 2");
  // The same sizes with QK-norm: a Qwen3 model, which a Llama checkpoint is not.
  ModelConfig qwen3 = model.config;
  qwen3.qk_norm = true;
  message = error_of([&] { HfWeights::open(dir.str(), qwen3, layout_build(qwen3)); });
  EXPECT_CONTAINS(message, "model_type is 'llama' (without QK-norm) but model.qk_norm is true");
}

// A trained lm_head is never dropped: a checkpoint holding one does not load
// into a tied model (it used to, using the embedding as the head instead).
TEST(HfWeights, TiedModelRefusesACheckpointLmHeadAndUntiedNeedsOne) {
  TempDir dir(kTempPrefix);
  TinyModel untied(false), tied(true);
  export_edited(tied, dir, [&](std::vector<StoredTensor>& tensors) {
    tensors.push_back({"lm_head.weight",
                       {40, 16},
                       std::vector<float>(untied.params.end() - 40 * 16, untied.params.end())});
  });
  std::string message = error_of([&] { HfWeights::open(dir.str(), tied.config, tied.layout); });
  EXPECT_CONTAINS(message, dir.file("model.safetensors"));
  EXPECT_CONTAINS(message, "'lm_head.weight'");
  EXPECT_CONTAINS(message, "set model.tie_embeddings = false");

  hf_export(tied.config, tied.layout, tied.params.data(), dir.str(), {});
  TempDir untied_dir(kTempPrefix);  // an untied config.json over tied weights
  hf_export(untied.config, untied.layout, untied.params.data(), untied_dir.str(), {});
  fs::copy_file(untied_dir.file("config.json"), dir.file("config.json"),
                fs::copy_options::overwrite_existing);
  message = error_of([&] { HfWeights::open(dir.str(), untied.config, untied.layout); });
  EXPECT_CONTAINS(message, dir.file("model.safetensors"));
  EXPECT_CONTAINS(message, "missing tensor 'lm_head.weight'");
}

// Without config.json, shapes alone would load 8 heads of 8 as 4 heads of 16.
TEST(HfWeights, MissingConfigJsonIsRefused) {
  TempDir dir(kTempPrefix);
  TinyModel model(true);
  hf_export(model.config, model.layout, model.params.data(), dir.str(), {});
  fs::remove(dir.file("config.json"));
  for (const std::string& path : {dir.str(), dir.file("model.safetensors")}) {
    const std::string message =
        error_of([&] { HfWeights::open(path, model.config, model.layout); });
    EXPECT_CONTAINS(message, dir.file("config.json") + ": missing");
    EXPECT_CONTAINS(message, "head counts");
  }
}

// The weights are found from any name of the checkpoint: the directory, its
// config.json or the weights file itself.
TEST(HfWeights, OpensFromTheDirectoryItsConfigOrTheWeightsFile) {
  TempDir dir(kTempPrefix);
  TinyModel model(true);
  hf_export(model.config, model.layout, model.params.data(), dir.str(), {});
  for (const std::string& path :
       {dir.str(), dir.file("config.json"), dir.file("model.safetensors")}) {
    EXPECT_EQ(read_whole_model(path, model), model.params) << path;
  }
}

TEST(HfWeights, ReadsAShardedCheckpointThroughItsIndex) {
  TempDir dir(kTempPrefix);
  TinyModel model(false);
  hf_export(model.config, model.layout, model.params.data(), dir.str(), {});
  std::vector<StoredTensor> tensors = load_tensors(dir.file("model.safetensors"));
  fs::remove(dir.file("model.safetensors"));
  std::vector<StoredTensor> shards[2];
  nlohmann::json index = {{"metadata", {{"total_size", model.layout.total_numel * 4}}}};
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string file = "model-0000" + std::to_string(i % 2 + 1) + "-of-00002.safetensors";
    index["weight_map"][tensors[i].name] = file;
    shards[i % 2].push_back(tensors[i]);
  }
  save_tensors(dir.file("model-00001-of-00002.safetensors"), shards[0]);
  save_tensors(dir.file("model-00002-of-00002.safetensors"), shards[1]);
  write_bytes(dir.file("model.safetensors.index.json"), index.dump());

  for (const std::string& path : {dir.str(), dir.file("model.safetensors.index.json")}) {
    EXPECT_EQ(read_whole_model(path, model), model.params) << path;
  }

  index["weight_map"].erase("model.norm.weight");
  write_bytes(dir.file("model.safetensors.index.json"), index.dump());
  const std::string message =
      error_of([&] { HfWeights::open(dir.str(), model.config, model.layout); });
  EXPECT_CONTAINS(message, dir.file("model.safetensors.index.json"));
  EXPECT_CONTAINS(message, "missing tensor 'model.norm.weight'");
}

}  // namespace
}  // namespace llm
