// A transformer block as a sequence of parts (block.cpp lists them in order:
// the attention's norm, the qkv projection, its biases, QK-norm, attention,
// the MLP's norm, the SwiGLU FFN). Each part declares in its own file (model/parts/)
// its rows of the block table (parameters, Hugging Face names,
// tensor-parallel split), its activation buffers and its forward and backward
// as calls into the op table; the transformer walks the parts
// (docs/architecture.md, "A block's parts").
// Data between parts: the forward's `hidden` is the latest (N, width)
// activation, `stream` this rank's rows of the residual stream the current
// branch adds to; the backward returns the gradient of the part's input
// hidden, and the residual stream's gradient sits in the sites' dres.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/block_activations.h"
#include "model/layout.h"
#include "schema/config.h"

namespace llm {

template <class A>
class LinearLayers;
template <class A>
class TensorParallelSites;

// How a block tensor splits across a tensor-parallel group of T ranks.
enum class TensorParallelSplit {
  replicated,  // held whole by every rank (norm gains)
  rows,        // column-parallel: each part's rows split evenly (heads, ffn columns, biases)
  columns,     // row-parallel: its columns (the input features) split evenly
};

// Consecutive rows of a block tensor that are one Hugging Face tensor.
struct TensorPart {
  std::string hf_name;  // after "model.layers.<l>.", e.g. "self_attn.q_proj.weight"
  int64_t rows;
};

// One row of the block table: a block tensor.
struct BlockTensorSpec {
  std::string name;               // after "layers.<l>.", e.g. "attn.wqkv"
  std::vector<TensorPart> parts;  // its rows, top to bottom
  int64_t columns = 0;            // 0: a vector (a norm gain, a bias)
  TensorParallelSplit split = TensorParallelSplit::replicated;
  // Adds to the residual stream: initialized with init_std / sqrt(2 n_layers).
  bool output_projection = false;
  // Its matmul runs again when full recomputation redoes the block's forward
  // (everything up to the last projection, whose output is not needed).
  bool recomputed = true;
  TensorInit init = TensorInit::normal;  // gains start at ones, biases at zeros

  int64_t rows() const;
  bool matrix() const { return columns > 0; }
};

// The forward's data between parts, for one block.
template <class A>
struct BlockFlow {
  const A* stream = nullptr;  // (n, C) the residual stream the current branch adds to
  A* hidden = nullptr;        // (N, width) the latest activation (RoPE rotates it in place)
  A* output = nullptr;        // (n, C) the block's output; null: stop before it (recomputation)
  // (N) the amax of each row of hidden, when the forward that wrote it wrote
  // them too (precision fp8: LinearLayers::input_row_amax); else null.
  const float* hidden_row_amax = nullptr;
  // hidden's q and k heads (fused qkv rows) carry RoPE already: the part that
  // wrote them rotated them as it wrote (QK-norm, or else the qkv bias), so
  // attention does not rotate them in its forward nor turn their gradient
  // back in its backward.
  bool qk_rotated = false;

  // hidden, its row amaxes and whether it is rotated always set together, so
  // no part sees another tensor's amaxes or rotation.
  void set_hidden(A* activation, const float* row_amax = nullptr, bool rotated = false) {
    hidden = activation;
    hidden_row_amax = row_amax;
    qk_rotated = rotated;
  }
};

// What a part computes with, for one block of one micro-batch.
template <class A>
struct BlockContext {
  const ModelConfig& config;
  const TypedOps<A>& ops;
  const RankShape& shape;
  LinearLayers<A>& linear;
  TensorParallelSites<A>& sites;
  const std::vector<size_t>& offsets;  // each table row's offset in a block's unit
  int slot = 0;                        // the activation slot
  int block = 0;                       // the block's index in the stage
  int B = 0, T = 0;
  const A* params = nullptr;  // the block's unit
  float* grads = nullptr;     // its gradients (backward)
  // Attention's inputs (and RoPE's, wherever it runs: rope_angles()): per
  // token its document's start and RoPE position (null: unmasked / positions
  // 0..T-1), the RoPE tables.
  const int32_t* doc_start = nullptr;
  const int32_t* positions = nullptr;
  const float* rope_cos = nullptr;
  const float* rope_sin = nullptr;
  // Decoding (decode_start >= 0): the rows are at positions decode_start + t
  // of one batch of sequences, whose keys and values go into kv_cache.
  int decode_start = -1;
  A* kv_cache = nullptr;
  int kv_capacity = 0;

  int N() const { return B * T; }
  // RoPE's angles for the rows (rope.h): decoding, row t of each sequence
  // is at position decode_start + t (the tables from there, no document
  // positions); else each token's position.
  RopeAngles rope_angles() const {
    const size_t first = static_cast<size_t>(decode_start >= 0 ? decode_start : 0) *
                         static_cast<size_t>(shape.D / 2);
    return {rope_cos + first, rope_sin + first, decode_start >= 0 ? nullptr : positions, T};
  }
  const A* param(int row) const { return params + offsets[row]; }
  float* grad(int row) const { return grads + offsets[row]; }
};

// A part of the block, for activations of storage type A.
template <class A>
class BlockPart {
 public:
  virtual ~BlockPart() = default;
  // Its activation buffers and backward scratch.
  virtual void plan(BlockActivations& activations, const RankShape& shape) = 0;
  // Moves `flow` past this part: where its forward leaves its outputs.
  virtual void pass(const BlockContext<A>& ctx, BlockFlow<A>& flow) const = 0;
  // Its forward from `in`, into the buffers pass() names.
  virtual void forward(const BlockContext<A>& ctx, const BlockFlow<A>& in) = 0;
  // Selective recomputation: its cheap outputs again (Keep::cheap).
  virtual void recompute(const BlockContext<A>&, const BlockFlow<A>&) {}
  // Its backward: from the gradient of its output hidden (`dout`; the
  // residual stream's in the sites' dres), its parameters' gradients (+=);
  // returns the gradient of its input hidden (null: its input is the stream).
  virtual const A* backward(const BlockContext<A>& ctx, const BlockFlow<A>& in, const A* dout) = 0;
};

// A Hugging Face architecture: config.json's model_type and the class
// transformers loads it with.
struct HfArchitecture {
  const char* model_type = nullptr;
  const char* class_name = nullptr;
  int default_head_dim = 0;  // a config.json without head_dim means this (0: dim / heads)
  // Its config class has LlamaConfig's head_dim and attention_bias keys.
  bool head_dim_and_attention_bias_keys = true;
};

// What a part is, whatever the storage type: its rows, what turns it on,
// what a model with it is in Hugging Face's world, and its makers.
struct BlockPartDeclaration {
  std::string name;   // its model.* key when one turns it on, e.g. "qk_norm"
  std::string title;  // in messages, e.g. "QK-norm"
  // The model.* key that turns the part on (null: every block has it).
  bool ModelConfig::*enabled_by = nullptr;
  // The architecture of a model with this part (none: Llama's).
  HfArchitecture hf_architecture;
  std::vector<BlockTensorSpec> (*tensors)(const ModelConfig& config);
  // first_row: the index of its first row in the block table.
  std::unique_ptr<BlockPart<float>> (*make_f32)(int first_row);
  std::unique_ptr<BlockPart<Bf16>> (*make_bf16)(int first_row);

  bool enabled(const ModelConfig& config) const { return !enabled_by || config.*enabled_by; }
};

// A part's maker for storage type A: part class template P, from its first row.
template <template <class> class P, class A>
std::unique_ptr<BlockPart<A>> make_part(int first_row) {
  return std::make_unique<P<A>>(first_row);
}

}  // namespace llm
