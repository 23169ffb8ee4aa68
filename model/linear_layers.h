// The model's linear layers: out = inp @ W^T (+ residual) and its backward,
// in the activation type A, or, for a block matrix under precision fp8, on
// FP8 codes (docs/training.md, "FP8"): the weight's codes are cast once per
// parameter version (UnitProvider::params_version) and kept across
// micro-batches and passes, row-major for the forward and transposed for the
// backward's input gradient (Hopper's TN GEMMs read both operands
// K-contiguous); the activations and output gradients are cast per matmul.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/backend.h"
#include "model/layout.h"
#include "device/arena.h"
#include "base/fp8.h"
#include "schema/config.h"

namespace llm {

// One block matrix's e4m3 codes (this rank's slice of it).
struct Fp8Weight {
  int row;                     // its row of the block table (block.h)
  int rows, cols;              // this rank's slice (OC, K)
  uint8_t* codes = nullptr;    // (rows, cols)
  uint8_t* codes_t = nullptr;  // (cols, rows)
  Fp8Scale* scale = nullptr;
};

template <class A>
class LinearLayers {
 public:
  // A weight (OC, K) and, for a block matrix under fp8, its FP8 codes.
  struct Weight {
    const A* values;
    const Fp8Weight* fp8 = nullptr;
  };

  // Block matrices at the layout's offsets, for the stage's blocks `layers`.
  LinearLayers(const Backend& backend, const ModelConfig& config, const ParameterLayout& layout,
               bool fp8);
  // precision fp8: the codes of micro-batches of up to N tokens' activations
  // and of every block weight, with their scales (none otherwise).
  void plan(BufferPlan& plan, size_t N);

  // Block `block`'s (of the stage) matrix at table row `row`, in its unit's
  // parameters `params`.
  Weight block_weight(int block, const A* params, int row) const;
  // precision fp8: block `block`'s matrices cast from `params`, unless cast
  // at `version` already.
  void cast_block_weights(int block, const A* params, uint64_t version);

  // out (N, OC) = inp (N, K) @ weight (OC, K)^T (+ residual when not null).
  void forward(A* out, const A* inp, Weight weight, const A* residual, int N, int K, int OC);
  // dinp (N, K) = dout (N, OC) @ weight (when dinp is not null), dweight
  // (OC, K) += dout^T inp.
  void backward(A* dinp, float* dweight, const A* dout, const A* inp, Weight weight, int N, int K,
                int OC);

 private:
  enum ScaleSlot { kInputScale, kGradScale, kScales };
  // The FP8 codes of x (rows, cols) scaled into scale slot `slot`: row-major
  // into codes and/or transposed into codes_t (either may be null).
  void quantize(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols, ScaleSlot slot,
                Fp8Format format);

  const Backend& backend_;
  const TypedOps<A>& ops_;
  const TypedOps<float>& f32_;
  const std::vector<size_t>& offsets_;
  bool fp8_;
  size_t widest_input_, widest_output_;  // of the block matmuls: K and OC
  // precision fp8: one matmul's activation codes (forward: the input
  // row-major; backward: the output gradient both ways and the input
  // transposed), their scales, every block weight's codes, and the
  // parameter version each block's were cast at.
  uint8_t* input_ = nullptr;   // (N, K) forward, (K, N) backward
  uint8_t* grad_ = nullptr;    // (N, OC) the output gradient (e5m2)
  uint8_t* grad_t_ = nullptr;  // (OC, N)
  Fp8Scale* scales_ = nullptr;
  std::vector<std::vector<Fp8Weight>> weights_;  // [block of the stage][its matrix]
  std::vector<std::optional<uint64_t>> cast_version_;
};

}  // namespace llm
