// Name/shape mapping between our parameter layout and transformers'
// LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM, and the export/import
// built on it.
// Invariant: the HfTensors of a unit tile it exactly, in offset order, so an
// element range of a unit is a concatenation of pieces of HF tensors.
#include "interop/hf_llama.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "model/block.h"
#include "base/error.h"
#include "base/file_io.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kConfigFile = "config.json";

// The transformers architecture of a model: Llama's, or the one a block part
// it has implies (its declaration's: Qwen3's for QK-norm, Qwen2's for the q,
// k and v biases). Two such parts make no architecture transformers has.
constexpr HfArchitecture kLlama = {"llama", "LlamaForCausalLM"};

HfArchitecture hf_architecture(const ModelConfig& c) {
  const BlockPartDeclaration* found = nullptr;
  for (const PlacedPart& placed : block_parts(c)) {
    if (!placed.part->hf_architecture.model_type) continue;
    if (found) {
      LLM_FAIL(
          "hf_llama: no Hugging Face architecture has both {} (model.{}, {}) and {} (model.{}, "
          "{})",
          found->title, found->name, found->hf_architecture.model_type, placed.part->title,
          placed.part->name, placed.part->hf_architecture.model_type);
    }
    found = placed.part;
  }
  return found ? found->hf_architecture : kLlama;
}
bool is_llama(const ModelConfig& c) { return hf_architecture(c).model_type == kLlama.model_type; }

// The parts that make a model another architecture than Llama's.
std::vector<const BlockPartDeclaration*> architecture_parts() {
  std::vector<const BlockPartDeclaration*> parts;
  for (const BlockPartDeclaration* part : all_block_parts()) {
    if (part->enabled_by && part->hf_architecture.model_type) parts.push_back(part);
  }
  return parts;
}

// An HF tensor making up `rows` consecutive rows of one of our tensors.
struct RowPiece {
  std::string name;
  int64_t rows;
};

// How our tensor `name` splits into HF tensors, top rows first (a block's
// from its description, model/block.h).
std::vector<RowPiece> hf_pieces(const std::string& name, const std::vector<int64_t>& shape,
                                const ModelConfig& c) {
  if (name == "embed.weight") return {{"model.embed_tokens.weight", shape[0]}};
  if (name == "norm.weight") return {{"model.norm.weight", shape[0]}};
  if (name == "lm_head.weight") return {{"lm_head.weight", shape[0]}};
  const std::string layers = "layers.";
  const size_t dot = name.find('.', layers.size());
  LLM_CHECK(name.starts_with(layers) && dot != std::string::npos,
            "hf_llama: no Hugging Face name for parameter '{}'", name);
  const std::string hf = "model." + name.substr(0, dot + 1);  // "model.layers.3."
  const std::string part = name.substr(dot + 1);
  for (const BlockTensorSpec& spec : block_tensors(c)) {
    if (spec.name != part) continue;
    std::vector<RowPiece> pieces;
    for (const TensorPart& p : spec.parts) pieces.push_back({hf + p.hf_name, p.rows});
    return pieces;
  }
  LLM_FAIL("hf_llama: no Hugging Face name for parameter '{}'", name);
}

// Tensors a checkpoint may hold that we neither need nor miss: buffers
// computed from the config, never trained weights.
bool is_ignorable(const std::string& hf_name) {
  return hf_name.ends_with(".rotary_emb.inv_freq");  // older transformers saved this buffer
}

// Whether `ids` (an id, or a list of ids) names `id`.
bool names_id(const nlohmann::json& ids, int id) {
  if (ids.is_number_integer()) return ids.get<int>() == id;
  if (!ids.is_array()) return false;
  return std::any_of(ids.begin(), ids.end(), [&](const nlohmann::json& one) {
    return one.is_number_integer() && one.get<int>() == id;
  });
}

// A token id as config.json spells it: null for none (-1).
nlohmann::ordered_json id_or_null(int id) {
  return id >= 0 ? nlohmann::ordered_json(id) : nlohmann::ordered_json(nullptr);
}

nlohmann::json read_json(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    LLM_FAIL("{}: not valid JSON: {}", path, e.what());
  }
}

// A checkpoint is named by its directory, its config.json, its
// model.safetensors (any .safetensors file) or its
// model.safetensors.index.json; the config.json sits beside the weights.
bool names_weights(const std::string& path) {
  return path.ends_with(".safetensors") || path.ends_with(".index.json");
}

// The directory a checkpoint path names: the path itself, or its file's.
std::string checkpoint_dir(const std::string& path) {
  LLM_CHECK(fs::exists(path),
            "{}: no such file or directory; a Hugging Face checkpoint is named by "
            "its directory, config.json, .safetensors file or .index.json",
            path);
  return fs::is_directory(path) ? path : fs::path(path).parent_path().string();
}

// The checkpoint's config.json, which must exist.
std::string config_json_path(const std::string& path) {
  const bool named_itself = !fs::is_directory(path) && !names_weights(path);
  const std::string config =
      named_itself ? path : (fs::path(checkpoint_dir(path)) / kConfigFile).string();
  LLM_CHECK(fs::exists(config),
            "{}: missing; a Hugging Face checkpoint ({}) needs its config.json beside the weights "
            "to tell what tensor shapes cannot (head counts, RoPE, tied embeddings)",
            config, path);
  return config;
}

// Typed, validated access to a config.json; every error names file and key.
class ConfigKeys {
 public:
  ConfigKeys(const nlohmann::json& json, std::string path) : json_(json), path_(std::move(path)) {
    LLM_CHECK(json_.is_object(), "{}: not a JSON object", path_);
  }

  bool has(const char* key) const { return json_.contains(key) && !json_[key].is_null(); }

  int positive_int(const char* key) const {
    LLM_CHECK(json_.contains(key), "{}: missing key '{}'", path_, key);
    const auto& v = json_[key];
    LLM_CHECK(v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= INT32_MAX,
              "{}: key '{}': expected a positive integer, found {}", path_, key, v.dump());
    return v.get<int>();
  }
  int positive_int(const char* key, int fallback) const {
    return has(key) ? positive_int(key) : fallback;
  }

  double positive_number(const nlohmann::json& v, const char* key) const {
    LLM_CHECK(v.is_number() && v.get<double>() > 0,
              "{}: key '{}': expected a positive number, found {}", path_, key, v.dump());
    return v.get<double>();
  }
  double positive_number(const char* key, double fallback) const {
    return has(key) ? positive_number(json_[key], key) : fallback;
  }

  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    LLM_CHECK(json_[key].is_boolean(), "{}: key '{}': expected true or false, found {}", path_, key,
              json_[key].dump());
    return json_[key].get<bool>();
  }

  // The string at `key` (fallback when absent), one of `allowed`.
  std::string one_of(const char* key, const std::vector<std::string>& allowed,
                     const std::string& fallback) const {
    if (!has(key)) return fallback;
    const auto& v = json_[key];
    for (const std::string& a : allowed) {
      if (v == a) return a;
    }
    LLM_FAIL("{}: key '{}' is {}, only {} supported", path_, key, v.dump(),
             nlohmann::json(allowed).dump());
  }

  // A list at `key` (when present) whose every entry is `supported`.
  void require_all(const char* key, const nlohmann::json& supported) const {
    if (!has(key)) return;
    const auto& v = json_[key];
    LLM_CHECK(v.is_array(), "{}: key '{}': expected a list, found {}", path_, key, v.dump());
    for (size_t i = 0; i < v.size(); ++i) {
      LLM_CHECK(v[i] == supported, "{}: key '{}[{}]' is {}, only {} is supported", path_, key, i,
                v[i].dump(), supported.dump());
    }
  }

  // A key we cannot represent other than with this value (when present).
  void require(const char* key, const nlohmann::json& supported) const {
    if (!has(key)) return;
    LLM_CHECK(json_[key] == supported, "{}: key '{}' is {}, only {} is supported", path_, key,
              json_[key].dump(), supported.dump());
  }

  // rope_theta, or (transformers >= 5) rope_parameters.rope_theta.
  double rope_theta() const {
    if (has("rope_theta") || !has("rope_parameters")) return positive_number("rope_theta", 10000.0);
    const auto& rope = json_["rope_parameters"];
    LLM_CHECK(rope.is_object() && rope.contains("rope_theta"),
              "{}: key 'rope_parameters' has no rope_theta", path_);
    return positive_number(rope["rope_theta"], "rope_parameters.rope_theta");
  }

  // Llama 3.1's RoPE scaling into c: rope_scaling (or, transformers >= 5,
  // rope_parameters) of rope_type "llama3" (older files: "type"); absent,
  // null or rope_type "default" is none.
  void rope_scaling(ModelConfig& c) const {
    const char* key = has("rope_scaling") ? "rope_scaling" : "rope_parameters";
    if (!has(key)) return;
    const auto& rope = json_[key];
    LLM_CHECK(rope.is_object(), "{}: key '{}': expected an object, found {}", path_, key,
              rope.dump());
    const char* type_key = rope.contains("rope_type") ? "rope_type" : "type";
    const nlohmann::json type = rope.value(type_key, nlohmann::json("default"));
    if (type == "default") return;
    LLM_CHECK(type == "llama3",
              "{}: key '{}.{}' is {}, only \"llama3\" (Llama 3.1's scaling) and \"default\" are "
              "supported",
              path_, key, type_key, type.dump());
    auto number = [&](const char* member) {
      const std::string name = fmt::format("{}.{}", key, member);
      LLM_CHECK(rope.contains(member), "{}: missing key '{}'", path_, name);
      return positive_number(rope[member], name.c_str());
    };
    c.rope_scaling_factor = number("factor");
    c.rope_low_freq_factor = number("low_freq_factor");
    c.rope_high_freq_factor = number("high_freq_factor");
    const double context = number("original_max_position_embeddings");
    LLM_CHECK(context == std::floor(context) && context <= INT32_MAX,
              "{}: key '{}.original_max_position_embeddings' is {}, not a whole number", path_, key,
              context);
    c.rope_original_context = static_cast<int>(context);
    LLM_CHECK(c.rope_scaling_factor >= 1, "{}: key '{}.factor' is {}, below 1", path_, key,
              c.rope_scaling_factor);
    LLM_CHECK(c.rope_high_freq_factor > c.rope_low_freq_factor,
              "{}: key '{}.high_freq_factor' ({}) is not above low_freq_factor ({})", path_, key,
              c.rope_high_freq_factor, c.rope_low_freq_factor);
  }

 private:
  const nlohmann::json& json_;
  std::string path_;
};

// The model keys a config.json decides, each with its name there. The
// frequency bands of Llama 3.1's RoPE scaling count only when it scales.
struct ArchitectureKey {
  std::string_view key;  // under model.
  const char* hf_key;
  bool scaling_band = false;
};
constexpr ArchitectureKey kSizeKeys[] = {
    {"dim", "hidden_size"},
    {"n_layers", "num_hidden_layers"},
    {"n_heads", "num_attention_heads"},
    {"n_kv_heads", "num_key_value_heads"},
    {"head_dim", "head_dim"},
    {"ffn_dim", "intermediate_size"},
    {"vocab_size", "vocab_size"},
    {"rope_theta", "rope_theta"},
    {"rope_scaling_factor", "rope_scaling.factor"},
    {"rope_low_freq_factor", "rope_scaling.low_freq_factor", true},
    {"rope_high_freq_factor", "rope_scaling.high_freq_factor", true},
    {"rope_original_context", "rope_scaling.original_max_position_embeddings", true},
    {"norm_eps", "rms_norm_eps"},
    {"tie_embeddings", "tie_word_embeddings"},
};

// The keys of kSizeKeys that `theirs` (a config.json's) decides, and the
// keys of the parts its model_type implies or not.
std::vector<ArchitectureKey> decided_keys(const ModelConfig& theirs) {
  std::vector<ArchitectureKey> keys;
  for (const ArchitectureKey& k : kSizeKeys) {
    if (!k.scaling_band || theirs.rope_scaling_factor != 1) keys.push_back(k);
  }
  for (const BlockPartDeclaration* part : architecture_parts())
    keys.push_back({part->name, "model_type"});
  return keys;
}

// head_dim 0 means dim / n_heads: `ours`, read with theirs' sizes, takes
// theirs' width whichever way it is written. Returns theirs, with ours'
// spelling of the head width where the two agree.
ModelConfig with_head_dim_spelt_as(ModelConfig theirs, int head_dim) {
  ModelConfig spelt = theirs;
  spelt.head_dim = head_dim;
  if (spelt.resolved_head_dim() == theirs.resolved_head_dim()) theirs.head_dim = head_dim;
  return theirs;
}

// The config.json of a checkpoint must describe the model we build: shapes
// alone cannot tell, e.g., 4 heads of 64 from 8 heads of 32.
void check_config_matches(const std::string& config_path, const ModelConfig& ours) {
  const ModelConfig theirs = with_head_dim_spelt_as(hf_read_config(config_path), ours.head_dim);
  for (const BlockPartDeclaration* part : architecture_parts()) {
    const bool theirs_has = theirs.*part->enabled_by, ours_has = ours.*part->enabled_by;
    LLM_CHECK(theirs_has == ours_has, "{}: model_type is '{}' ({} {}) but model.{} is {}",
              config_path, hf_architecture(theirs).model_type, theirs_has ? "with" : "without",
              part->title, part->name, ours_has);
  }
  for (const ArchitectureKey& k : decided_keys(theirs)) {
    const std::string hf_value = config_model_value(theirs, k.key);
    const std::string our_value = config_model_value(ours, k.key);
    LLM_CHECK(hf_value == our_value, "{}: {} is {} but model.{} is {}", config_path, k.hf_key,
              hf_value, k.key, our_value);
  }
}

// Where a checkpoint's tensors live.
struct CheckpointIndex {
  std::string dir;     // where a config.json would sit
  std::string source;  // what errors name: the model.safetensors or the index
  std::map<std::string, std::string> file_of;  // HF tensor name -> safetensors path
};

// path: a .safetensors file, an .index.json, or the config.json or directory
// beside either.
CheckpointIndex checkpoint_index(const std::string& path) {
  CheckpointIndex checkpoint;
  checkpoint.dir = checkpoint_dir(path);
  if (names_weights(path) && !fs::is_directory(path)) {
    checkpoint.source = path;
  } else {
    const fs::path dir = checkpoint.dir;
    checkpoint.source = (dir / kWeightsFile).string();
    if (!fs::exists(checkpoint.source)) checkpoint.source = (dir / kIndexFile).string();
    LLM_CHECK(fs::exists(checkpoint.source), "{}: holds neither {} nor {}", dir.string(),
              kWeightsFile, kIndexFile);
  }
  if (!checkpoint.source.ends_with(".index.json")) {
    for (const std::string& name : SafetensorsFile::open(checkpoint.source).names()) {
      checkpoint.file_of[name] = checkpoint.source;
    }
    return checkpoint;
  }
  const nlohmann::json index = read_json(checkpoint.source);
  LLM_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
            "{}: missing object 'weight_map'", checkpoint.source);
  for (const auto& [name, file] : index["weight_map"].items()) {
    LLM_CHECK(file.is_string(), "{}: weight_map entry of '{}' is not a file name",
              checkpoint.source, name);
    checkpoint.file_of[name] = (fs::path(checkpoint.dir) / file.get<std::string>()).string();
  }
  return checkpoint;
}

}  // namespace

std::vector<HfTensor> hf_llama_tensors(const ModelConfig& config, const ParameterLayout& layout) {
  std::vector<HfTensor> tensors;
  for (const TensorSpec& t : layout.tensors) {
    const int64_t row_numel = static_cast<int64_t>(t.numel) / t.shape[0];
    size_t offset = t.offset;
    int64_t rows = 0;
    for (RowPiece& piece : hf_pieces(t.name, t.shape, config)) {
      std::vector<int64_t> shape = t.shape;
      shape[0] = piece.rows;
      const size_t numel = static_cast<size_t>(piece.rows * row_numel);
      tensors.push_back({std::move(piece.name), std::move(shape), t.unit, offset, numel});
      offset += numel;
      rows += piece.rows;
    }
    LLM_CHECK(rows == t.shape[0], "hf_llama: parameter '{}' has {} rows but config gives {}",
              t.name, t.shape[0], rows);
  }
  return tensors;
}

void hf_export(const ModelConfig& config, const ParameterLayout& layout, const float* params,
               const std::string& out_dir, const HfExportOptions& options) {
  LLM_CHECK(options.dtype == "float32" || options.dtype == "bfloat16",
            "hf_export: dtype '{}' is not float32 or bfloat16", options.dtype);
  const Dtype dtype = options.dtype == "float32" ? Dtype::f32 : Dtype::bf16;
  const HfArchitecture architecture = hf_architecture(config);  // before anything is written
  std::error_code error;
  fs::create_directories(out_dir, error);
  LLM_CHECK(!error, "hf_export: cannot create {}: {}", out_dir, error.message());

  std::vector<size_t> unit_begin(layout.units.size(), 0);
  for (size_t u = 1; u < layout.units.size(); ++u) {
    unit_begin[u] = unit_begin[u - 1] + layout.units[u - 1].numel;
  }

  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");  // transformers refuses files without it
  for (const HfTensor& t : hf_llama_tensors(config, layout)) {
    writer.add(t.name, t.shape, params + unit_begin[t.unit] + t.offset, dtype);
  }
  writer.write((fs::path(out_dir) / kWeightsFile).string());

  // Without a head_dim key (Qwen2) the heads are hidden_size / num_attention_heads
  // wide; transformers reads head_dim where it is written, so other widths keep it.
  const bool llama_keys = architecture.head_dim_and_attention_bias_keys;
  const bool derived_head_dim = config.dim == config.n_heads * config.resolved_head_dim();
  nlohmann::ordered_json json;  // keys in the order written
  json["architectures"] = nlohmann::ordered_json::array({architecture.class_name});
  json["model_type"] = architecture.model_type;
  json["hidden_size"] = config.dim;
  json["intermediate_size"] = config.ffn_dim;
  json["num_hidden_layers"] = config.n_layers;
  json["num_attention_heads"] = config.n_heads;
  json["num_key_value_heads"] = config.n_kv_heads;
  if (llama_keys || !derived_head_dim) json["head_dim"] = config.resolved_head_dim();
  json["vocab_size"] = config.vocab_size;
  json["rms_norm_eps"] = config.norm_eps;
  json["rope_theta"] = config.rope_theta;
  json["max_position_embeddings"] = options.max_position_embeddings;
  json["tie_word_embeddings"] = config.tie_embeddings;
  json["hidden_act"] = "silu";
  if (llama_keys) json["attention_bias"] = false;  // q, k and v have one in Qwen2, always
  json["torch_dtype"] = options.dtype;
  json["bos_token_id"] = id_or_null(options.bos_token_id);
  json["eos_token_id"] = options.eos_token_id;
  json["initializer_range"] = config.init_std;
  if (config.rope_scaling_factor != 1) {
    json["rope_scaling"] = {{"rope_type", "llama3"},
                            {"factor", config.rope_scaling_factor},
                            {"low_freq_factor", config.rope_low_freq_factor},
                            {"high_freq_factor", config.rope_high_freq_factor},
                            {"original_max_position_embeddings", config.rope_original_context}};
  }
  if (!is_llama(config)) {  // Qwen's own keys, each at what we train: full attention everywhere
    json["use_sliding_window"] = false;
    json["sliding_window"] = nullptr;
    json["max_window_layers"] = config.n_layers;
  } else {
    json["mlp_bias"] = false;  // a LlamaConfig key, unknown to Qwen's configs
  }
  write_file_atomically((fs::path(out_dir) / kConfigFile).string(), json.dump(2) + "\n");
  const nlohmann::ordered_json generation_eos =
      options.end_of_turn_id >= 0
          ? nlohmann::ordered_json{options.end_of_turn_id, options.eos_token_id}
          : nlohmann::ordered_json(options.eos_token_id);
  const nlohmann::ordered_json generation = {{"bos_token_id", id_or_null(options.bos_token_id)},
                                             {"eos_token_id", generation_eos},
                                             {"max_length", options.max_position_embeddings},
                                             {"do_sample", true}};
  write_file_atomically((fs::path(out_dir) / "generation_config.json").string(),
                        generation.dump(2) + "\n");
}

int hf_read_context_length(const std::string& checkpoint) {
  const std::string path = config_json_path(checkpoint);
  return ConfigKeys(read_json(path), path).positive_int("max_position_embeddings", 2048);
}

void hf_check_document_tokens(const std::string& checkpoint, const std::string& tokenizer,
                              int bos_id, int eos_id) {
  const std::string path = config_json_path(checkpoint);
  const nlohmann::json json = read_json(path);
  if (bos_id >= 0 && json.contains("bos_token_id") && !json["bos_token_id"].is_null()) {
    const nlohmann::json& bos = json["bos_token_id"];
    LLM_CHECK(bos.is_number_integer() && bos.get<int>() == bos_id,
              "{}: bos_token_id is {} but the tokenizer {} begins documents with {}", path,
              bos.dump(), tokenizer, bos_id);
  }
  if (!json.contains("eos_token_id") || json["eos_token_id"].is_null()) return;
  const nlohmann::json& eos = json["eos_token_id"];
  if (names_id(eos, eos_id)) return;
  // An instruct model's config.json names its end of turn (Qwen3's
  // <|im_end|>); its generation_config.json lists the document end too.
  const fs::path generation = fs::path(path).parent_path() / "generation_config.json";
  nlohmann::json generation_eos;
  if (fs::exists(generation)) {
    const nlohmann::json g = read_json(generation.string());
    if (g.is_object() && g.contains("eos_token_id")) generation_eos = g["eos_token_id"];
  }
  LLM_CHECK(names_id(generation_eos, eos_id),
            "{}: eos_token_id is {}{} but the tokenizer {} ends documents with {}", path,
            eos.dump(),
            generation_eos.is_null()
                ? ""
                : fmt::format(" ({}: {})", generation.string(), generation_eos.dump()),
            tokenizer, eos_id);
}

ModelConfig hf_read_config(const std::string& checkpoint) {
  const std::string path = config_json_path(checkpoint);
  const nlohmann::json json = read_json(path);
  const ConfigKeys keys(json, path);
  std::vector<std::string> model_types = {kLlama.model_type};
  for (const BlockPartDeclaration* part : architecture_parts())
    model_types.push_back(part->hf_architecture.model_type);
  const std::string model_type = keys.one_of("model_type", model_types, kLlama.model_type);
  const bool llama = model_type == kLlama.model_type;
  keys.require("hidden_act", "silu");
  keys.require("attention_bias", false);
  keys.require("mlp_bias", false);
  keys.require("use_sliding_window", false);
  // Qwen3 keeps a window size it uses only with use_sliding_window (false,
  // above); a Llama config naming one asks for something LlamaConfig lacks.
  if (llama) keys.require("sliding_window", nullptr);
  keys.require_all("layer_types", "full_attention");

  ModelConfig c;
  for (const BlockPartDeclaration* part : architecture_parts())
    c.*part->enabled_by = model_type == part->hf_architecture.model_type;
  c.dim = keys.positive_int("hidden_size");
  c.n_layers = keys.positive_int("num_hidden_layers");
  c.n_heads = keys.positive_int("num_attention_heads");
  c.n_kv_heads = keys.positive_int("num_key_value_heads", c.n_heads);  // LlamaConfig's defaults
  c.ffn_dim = keys.positive_int("intermediate_size");
  c.vocab_size = keys.positive_int("vocab_size");
  c.rope_theta = keys.rope_theta();
  keys.rope_scaling(c);
  c.norm_eps = keys.positive_number("rms_norm_eps", 1e-6);
  c.tie_embeddings = keys.boolean("tie_word_embeddings", false);
  c.init_std = keys.positive_number("initializer_range", 0.02);

  LLM_CHECK(c.n_heads % c.n_kv_heads == 0,
            "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", path,
            c.n_heads, c.n_kv_heads);
  // Absent, LlamaConfig derives head_dim from the sizes; Qwen3Config takes
  // 128 (Qwen3-0.6B, 4B and 32B rely on it). model.head_dim is set only
  // where it differs from the derived one, so a Llama config reads as before.
  const HfArchitecture architecture = hf_architecture(c);
  if (keys.has("head_dim") || architecture.default_head_dim) {
    const int head_dim = keys.positive_int("head_dim", architecture.default_head_dim);
    LLM_CHECK(head_dim % 2 == 0, "{}: key 'head_dim' is {}{}, not even as RoPE needs", path,
              head_dim,
              keys.has("head_dim") ? "" : fmt::format(" ({}'s default)", architecture.model_type));
    if (c.dim % c.n_heads != 0 || head_dim != c.dim / c.n_heads) c.head_dim = head_dim;
  } else {
    LLM_CHECK(c.dim % c.n_heads == 0,
              "{}: hidden_size {} is not a multiple of num_attention_heads {} and no 'head_dim' "
              "says the head size",
              path, c.dim, c.n_heads);
  }
  return c;
}

void hf_import_architecture(Config& config) {
  const std::string& init_from = config.model.init_from;
  if (init_from.empty()) return;
  LLM_CHECK(fs::exists(init_from),
            "{}: model.init_from = '{}': no such file or directory (a Hugging Face checkpoint's "
            "directory, config.json, .safetensors file or model.safetensors.index.json)",
            config_user_origin(config, "model.init_from").value_or(config.path), init_from);
  const std::string path = config_json_path(init_from);
  const ModelConfig theirs = with_head_dim_spelt_as(hf_read_config(path), config.model.head_dim);
  std::vector<std::string_view> keys;
  for (const ArchitectureKey& k : decided_keys(theirs)) keys.push_back(k.key);
  config_import_model(config, theirs, keys, path);
}

HfWeights HfWeights::open(const std::string& path, const ModelConfig& config,
                          const ParameterLayout& layout) {
  const CheckpointIndex checkpoint = checkpoint_index(path);
  check_config_matches(config_json_path(path), config);
  const std::string& source = checkpoint.source;
  const std::map<std::string, std::string>& file_of = checkpoint.file_of;

  const std::vector<HfTensor> expected = hf_llama_tensors(config, layout);
  std::set<std::string> expected_names;
  for (const HfTensor& t : expected) expected_names.insert(t.name);
  for (const auto& [name, file] : file_of) {
    LLM_CHECK(name != "lm_head.weight" || expected_names.count(name),
              "{}: holds a trained 'lm_head.weight' but model.tie_embeddings = true would drop it "
              "and use the embedding as the head; set model.tie_embeddings = false",
              source);
    LLM_CHECK(expected_names.count(name) || is_ignorable(name),
              "{}: tensor '{}' has no place in our {} model (biases? another architecture?)",
              source, name, hf_architecture(config).class_name);
  }

  HfWeights weights;
  std::map<std::string, size_t> file_index;  // safetensors path -> index into files_
  weights.unit_sources_.resize(layout.units.size());
  for (const HfTensor& t : expected) {
    auto located = file_of.find(t.name);
    LLM_CHECK(located != file_of.end(), "{}: missing tensor '{}' (expected shape {}){}", source,
              t.name, shape_string(t.shape),
              t.name == "lm_head.weight" ? "; for a tied checkpoint set model.tie_embeddings = true"
                                         : "");
    auto [it, inserted] = file_index.try_emplace(located->second, weights.files_.size());
    if (inserted) weights.files_.push_back(SafetensorsFile::open(located->second));
    const SafetensorsFile& file = weights.files_[it->second];
    LLM_CHECK(file.has(t.name), "{}: missing tensor '{}' (expected shape {}), listed in {}",
              file.path(), t.name, shape_string(t.shape), source);
    LLM_CHECK(file.info(t.name).shape == t.shape, "{}: tensor '{}' has shape {}, expected {}",
              file.path(), t.name, shape_string(file.info(t.name).shape), shape_string(t.shape));
    weights.unit_sources_[t.unit].push_back({t, it->second});
  }
  for (const UnitSpec& unit : layout.units) weights.unit_numel_.push_back(unit.numel);
  return weights;
}

void HfWeights::read(int unit, size_t begin, size_t count, float* out) const {
  LLM_CHECK(unit >= 0 && static_cast<size_t>(unit) < unit_sources_.size(),
            "HfWeights: unit {} out of range [0, {})", unit, unit_sources_.size());
  const size_t end = begin + count;
  LLM_CHECK(begin <= end && end <= unit_numel_[unit],
            "HfWeights: elements [{}, {}) outside unit {} of {} elements", begin, end, unit,
            unit_numel_[unit]);
  for (const Source& s : unit_sources_[unit]) {
    const size_t lo = std::max(begin, s.tensor.offset);
    const size_t hi = std::min(end, s.tensor.offset + s.tensor.numel);
    if (lo >= hi) continue;
    files_[s.file].read_f32(s.tensor.name, lo - s.tensor.offset, hi - lo, out + (lo - begin));
  }
}

}  // namespace llm
