// Where every parameter lives. Parameters are grouped in *units*, each one
// contiguous flat fp32 buffer: unit 0 is the token embedding, units 1..L the
// transformer blocks, unit L+1 the final norm (and LM head unless tied).
// Gradients and optimizer moments mirror this layout exactly.
// A layout describes the whole model, or one rank's slice of it (ModelSlice):
// a pipeline stage holds a run of consecutive blocks (the embedding too on the
// first stage, the head on the last) and its other units are empty (numel 0,
// no tensors), so unit indices are the whole model's on every stage; a
// tensor-parallel rank holds a slice of each of its tensors: heads (kv heads included) and ffn
// columns split whole across ranks, column-parallel wqkv / w13 (and the qkv bias, split as
// wqkv's rows) and row-parallel wo / w2, the vocabulary split for the embedding and the LM
// head, norm gains replicated.
// Every local tensor knows where its elements sit in the whole model's
// tensor of the same name (SliceRun), which is how initialization,
// checkpoints and Hugging Face weights stay global.
// Invariant: a tensor never spans two units; offsets are in elements from the
// start of their unit; within a block, wq|wk|wv are one fused (H+2KV)*D x C
// matrix and gate|up one fused 2F x C matrix (a slice keeps the order: its q
// heads, its kv heads' k, their v; its gate columns, their up).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "schema/config.h"

namespace llm {

// Which part of the model a layout holds: tensor-parallel rank tp_rank of
// tp_size, pipeline stage pp_rank of pp_size (1, 1 = the whole model).
struct ModelSlice {
  int tp_rank = 0;
  int tp_size = 1;
  int pp_rank = 0;
  int pp_size = 1;
  bool first_stage() const { return pp_rank == 0; }
  bool last_stage() const { return pp_rank == pp_size - 1; }
};

// The blocks [begin, end) of pipeline stage `stage` of `stages`: consecutive,
// as even as n_layers allows, the earlier stages taking one more when it does
// not divide (the last stage also holds the final norm and LM head).
struct LayerRange {
  int begin = 0, end = 0;
  int count() const { return end - begin; }
};
LayerRange pipeline_stage_layers(int n_layers, int stages, int stage);

// A stretch of a local tensor: `repeats` blocks of `length` elements, back to
// back locally from element `local`; block i is elements [global + i *
// global_stride, + length) of the whole model's tensor.
struct SliceRun {
  size_t local = 0, global = 0, length = 0, repeats = 1, global_stride = 0;
};

// How a tensor's elements start (layout_init_params).
enum class TensorInit {
  normal,  // normal(0, init_std); an output projection's std scaled by 1 / sqrt(2 n_layers)
  ones,    // norm gains
  zeros,   // biases
};

struct TensorSpec {
  std::string name;            // e.g. "layers.3.attn.wqkv"
  int unit;                    // index into ParameterLayout::units
  size_t offset;               // first element within the unit
  std::vector<int64_t> shape;  // row-major (this slice's)
  size_t numel;
  bool weight_decay;  // matrices decay, vectors (norm gains, biases) do not
  TensorInit init = TensorInit::normal;
  // The whole model's tensor of the same name: its index, unit, offset in its
  // unit and shape in layout_build(config), and how this slice maps onto it.
  int global_index = 0;
  int global_unit = 0;
  size_t global_offset = 0;
  std::vector<int64_t> global_shape;
  std::vector<SliceRun> runs;  // cover [0, numel) in order
  // Held whole and alike by every tensor-parallel rank (norm gains when
  // tp_size > 1): counted once in norms, saved once.
  bool replicated = false;
  // Adds to the residual stream (block.h): initialized with a smaller std.
  bool output_projection = false;
};

struct UnitSpec {
  std::string name;  // "embed", "layers.3", "head"
  size_t numel;
  std::vector<int> tensors;  // indices into ParameterLayout::tensors, in offset order
  size_t global_numel = 0;   // the whole model's unit (numel when not sliced)
};

// Where each of a block's tensors (block.h's table, row by row) starts in its
// unit, the same in every block this layout holds: layout_build fills it as
// it adds them, and the model reads parameters and gradients through it.
struct BlockTensors {
  std::vector<size_t> offsets;  // [row of block_tensors()]
};

struct ParameterLayout {
  std::vector<UnitSpec> units;
  std::vector<TensorSpec> tensors;
  size_t total_numel = 0;
  ModelSlice slice;
  LayerRange layers;            // the blocks this layout holds
  BlockTensors block;           // their tensors' offsets
  int global_tensor_count = 0;  // tensors of the whole model

  int embed_unit() const { return 0; }
  int block_unit(int layer) const { return 1 + layer; }
  int head_unit() const { return static_cast<int>(units.size()) - 1; }
  // Index of the tensor called `name`; throws if there is none.
  int find(const std::string& name) const;
  size_t max_unit_numel() const;
};

ParameterLayout layout_build(const ModelConfig& config, ModelSlice slice = {});

// A contiguous piece of the whole model: elements [begin, begin + length) of
// global unit `unit`, `repeats` times at `stride` apart, whose data sits back
// to back at `local` elements from the start of the local range it came from.
struct GlobalRun {
  int tensor;  // the local tensor it belongs to
  int unit;
  size_t begin, length, repeats, stride;
  size_t local;
  bool replicated;  // of a replicated tensor
};
// The global runs of elements [begin, begin + count) of local `unit`, in
// local order; they cover the range exactly.
std::vector<GlobalRun> layout_global_runs(const ParameterLayout& layout, int unit, size_t begin,
                                          size_t count);

// Fills elements [begin, end) of `unit` with their initial values, each
// tensor's by its TensorInit. The value of an element depends only on (seed, global tensor,
// global element index), so a rank can initialize just its slice and every
// tensor-parallel slicing initializes the same model.
void layout_init_params(const ParameterLayout& layout, const ModelConfig& config, uint64_t seed,
                        int unit, size_t begin, size_t end, float* out);

}  // namespace llm
