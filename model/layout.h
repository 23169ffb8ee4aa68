// Where every parameter lives. Parameters are grouped in *units*, each one
// contiguous flat fp32 buffer: unit 0 is the token embedding, units 1..L the
// transformer blocks, unit L+1 the final norm (and LM head unless tied).
// Gradients and optimizer moments mirror this layout exactly.
// Invariant: a tensor never spans two units; offsets are in elements from the
// start of their unit; within a block, wq|wk|wv are one fused (H+2KV)*D x C
// matrix and gate|up one fused 2F x C matrix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace llm {

struct TensorSpec {
  std::string name;            // e.g. "layers.3.attn.wqkv"
  int unit;                    // index into ParameterLayout::units
  size_t offset;               // first element within the unit
  std::vector<int64_t> shape;  // row-major
  size_t numel;
  bool weight_decay;           // matrices decay, norm gains do not
};

struct UnitSpec {
  std::string name;  // "embed", "layers.3", "head"
  size_t numel;
  std::vector<int> tensors;  // indices into ParameterLayout::tensors, in offset order
};

struct ParameterLayout {
  std::vector<UnitSpec> units;
  std::vector<TensorSpec> tensors;
  size_t total_numel = 0;

  int embed_unit() const { return 0; }
  int block_unit(int layer) const { return 1 + layer; }
  int head_unit() const { return static_cast<int>(units.size()) - 1; }
  // Index of the tensor called `name`; throws if there is none.
  int find(const std::string& name) const;
  size_t max_unit_numel() const;
};

ParameterLayout layout_build(const ModelConfig& config);

// Fills elements [begin, end) of `unit` with their initial values: normal(0,
// init_std) for matrices (output projections scaled by 1/sqrt(2 L)), ones for
// norm gains. The value of an element depends only on (seed, tensor, index),
// so a rank can initialize just its slice.
void layout_init_params(const ParameterLayout& layout, const ModelConfig& config, uint64_t seed,
                        int unit, size_t begin, size_t end, float* out);

}  // namespace llm
