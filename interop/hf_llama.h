// Interoperability with Hugging Face transformers' LlamaForCausalLM,
// Qwen2ForCausalLM for a model with q, k and v biases (model.qkv_bias), and
// Qwen3ForCausalLM for a model with QK-norm (model.qk_norm): export of
// our parameters as model.safetensors + config.json, and import of such a
// checkpoint slice by slice (what `[model] init_from` reads on every rank).
// Invariant: our fused tensors are row concatenations of HF tensors (wqkv =
// [q_proj | k_proj | v_proj], bqkv likewise of their biases, w13 = [gate_proj
// | up_proj]) and both use the
// "rotate half" RoPE, so every HF tensor is one contiguous element range of
// one of our units, copied without permutation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "schema/config.h"
#include "model/layout.h"
#include "interop/safetensors.h"

namespace llm {

// One HF tensor and the elements of our layout it holds.
struct HfTensor {
  std::string name;            // e.g. "model.layers.0.self_attn.k_proj.weight"
  std::vector<int64_t> shape;  // as transformers stores it, e.g. (KV * D, C)
  int unit;                    // our unit holding it
  size_t offset;               // its first element within that unit
  size_t numel;
};

// Every HF tensor of the model, in our layout order (no lm_head when tied).
std::vector<HfTensor> hf_llama_tensors(const ModelConfig& config, const ParameterLayout& layout);

struct HfExportOptions {
  std::string dtype = "float32";  // or "bfloat16" (tensors rounded to nearest even)
  int max_position_embeddings = 2048;
  int bos_token_id = 1;  // -1: written as null (a tokenizer without BOS)
  int eos_token_id = 2;
  // Where a chat reply ends (-1: none): generation_config.json's
  // eos_token_id lists it before eos_token_id, so that generation stops at
  // either, as ./train generate does with and without --chat.
  int end_of_turn_id = -1;
};

// Writes out_dir/model.safetensors, config.json and generation_config.json
// (creating out_dir), each through a temporary file and a rename. params
// holds all units concatenated in unit order (layout.total_numel floats).
void hf_export(const ModelConfig& config, const ParameterLayout& layout, const float* params,
               const std::string& out_dir, const HfExportOptions& options);

// A checkpoint is named by its directory, its config.json, a .safetensors file
// or a model.safetensors.index.json; each reader below takes any of them and
// finds the config.json beside the weights (its absence is an error naming it).

// The ModelConfig described by a checkpoint's transformers config.json:
// model_type llama, qwen2 (model.qkv_bias) or qwen3 (model.qk_norm), with
// Llama 3.1's RoPE scaling (rope_type llama3) as model.rope_*. Rejects what we
// cannot represent (Llama's attention_bias and mlp_bias, other RoPE scalings, sliding windows,
// ...); a head_dim other than hidden_size / num_attention_heads is model.head_dim. Errors name the
// file and key.
ModelConfig hf_read_config(const std::string& checkpoint);
// model.init_from's architecture into `config` (nothing without it): every
// model key its config.json decides (sizes, heads, head_dim, vocabulary,
// RoPE and its scaling, norm epsilon, tied embeddings, QK-norm) that the user
// left out takes the file's value; one the user set must agree, or the error
// names both values and where each came from (config_import_model). A head_dim
// of 0 agrees with a head as wide as dim / n_heads. config_load runs this
// before validation, so the whole run (plan, memory, topology, the saved
// config) sees the checkpoint's model.
void hf_import_architecture(Config& config);
// The context length the same config.json declares: max_position_embeddings
// (LlamaConfig's default, 2048, when absent); errors name the file and key.
int hf_read_context_length(const std::string& checkpoint);
// Checks that the same config.json's bos_token_id and eos_token_id (an id, or
// a list of ids for EOS, as Llama 3.1 has; or the EOS list of the
// generation_config.json beside it) name `tokenizer`'s BOS and EOS, so
// that fine-tuning data starts and ends documents as the model learned to;
// an absent key is not checked, nor bos_token_id for a tokenizer without BOS
// (bos_id -1: Qwen3's config.json names one its tokenizer never adds). Errors name the file, the
// key and both ids.
void hf_check_document_tokens(const std::string& checkpoint, const std::string& tokenizer,
                              int bos_id, int eos_id);

// An opened HF checkpoint, validated against our config: the config.json
// beside the weights exists and describes `config` (shapes alone cannot tell 8
// heads from 4 of twice the size), every expected tensor exists with the
// expected shape, and no trained tensor goes unused (an lm_head.weight into a
// tied model is an error, not a silent drop).
class HfWeights {
 public:
  // path: a .safetensors file, a sharded checkpoint's model.safetensors.index.json,
  // or the directory or config.json beside either.
  static HfWeights open(const std::string& path, const ModelConfig& config,
                        const ParameterLayout& layout);

  // Elements [begin, begin + count) of our unit `unit`, as f32.
  void read(int unit, size_t begin, size_t count, float* out) const;

 private:
  struct Source {
    HfTensor tensor;
    size_t file;  // index into files_
  };

  HfWeights() = default;

  std::vector<SafetensorsFile> files_;
  std::vector<std::vector<Source>> unit_sources_;  // per unit, in offset order
  std::vector<size_t> unit_numel_;
};

}  // namespace llm
