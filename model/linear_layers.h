// The model's linear layers: out = inp @ W^T (+ residual) and its backward,
// in the activation type A, or, for a block matrix under precision fp8, on
// FP8 codes (docs/training.md, "FP8"): the weight's codes are cast once per
// parameter version (UnitProvider::params_version) and kept across
// micro-batches and passes, row-major for the forward and transposed for the
// backward's input gradient (Hopper's TN GEMMs read both operands
// K-contiguous); the activations and output gradients are cast per matmul.
// The forward's FP8 GEMMs sum as set_forward_accumulation says (promoted
// unless told), the backward's always promoted (fp8_matmul.h). A forward
// input's scale comes from the amaxes of its rows when the kernel that wrote
// it (RMSNorm, SwiGLU) left them in input_row_amax(), else from an amax pass
// over it: the same scale either way (base/fp8.h).
// Delayed scaling (training.fp8_scaling = delayed): each forward input of a
// block matrix has an entry (Fp8Weight::input); for a whole optimizer step
// its scale is the one begin_delayed_step set from the amax history (so
// every micro-batch and recomputation casts alike), each forward folds the
// input's amax into the entry's running maximum, and the writer of the
// input (RMSNorm, SwiGLU: input_cast) writes its codes too, so the forward
// casts nothing; an input with no such writer is cast with its amax in the
// same pass (fp8_cast_amax).
// The backward casts a matmul's input again with the scale its forward
// used (Weight::input_scale), and an output gradient's scale comes from its
// rows' amaxes where its writer left them (dout_row_amax), else from an
// amax pass (docs/training.md, "FP8").
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
  int input = 0;               // its forward input's entry under delayed scaling
  uint8_t* codes = nullptr;    // (rows, cols)
  uint8_t* codes_t = nullptr;  // (cols, rows)
  Fp8Scale* scale = nullptr;
  // [activation slot] the scale the forward of that slot's micro-batch cast
  // its input with under current scaling, kept for its backward.
  Fp8Scale* input_scales = nullptr;
};

// What the kernel that writes a block matmul's forward input writes beside
// it for the matmul's FP8 path (LinearLayers::input_cast); null: nothing.
struct Fp8InputCast {
  float* row_amax = nullptr;        // (N) each row's amax
  uint8_t* codes = nullptr;         // (N, K) the input's e4m3 codes with `scale` (delayed scaling)
  const Fp8Scale* scale = nullptr;  // in the backend's memory
};

template <class A>
class LinearLayers {
 public:
  // A weight (OC, K) and, for a block matrix under fp8, its FP8 codes and
  // the scale of its input: where the forward keeps it for the backward of
  // the same micro-batch, or under delayed scaling with scales set the
  // step's delayed scale.
  struct Weight {
    const A* values;
    const Fp8Weight* fp8 = nullptr;
    Fp8Scale* input_scale = nullptr;
  };

  // Block matrices at the layout's offsets, for the stage's blocks `layers`.
  LinearLayers(const Backend& backend, const ModelConfig& config, const ParameterLayout& layout,
               bool fp8);
  // precision fp8: the codes of micro-batches of up to N tokens' activations
  // and of every block weight, with their scales, and each weight's input
  // scale for `slots` micro-batches in flight (none otherwise).
  void plan(BufferPlan& plan, size_t N, int slots);

  // Block `block`'s (of the stage) matrix at table row `row`, in its unit's
  // parameters `params`, for the micro-batch in activation slot `slot`.
  Weight block_weight(int slot, int block, const A* params, int row) const;
  // precision fp8: block `block`'s matrices cast from `params`, unless cast
  // at `version` already.
  void cast_block_weights(int block, const A* params, uint64_t version);
  // precision fp8: how the forward's GEMMs sum (training.fp8_fast_accum).
  void set_forward_accumulation(Fp8Accumulation accumulation) {
    forward_accumulation_ = accumulation;
  }
  // Where the kernel that writes a block matmul's next input can write the
  // amax of each of its N rows, for forward's inp_row_amax (N floats): null
  // unless precision fp8 with the fused amax on (the default).
  float* input_row_amax() const { return fused_amax_ ? input_row_amax_ : nullptr; }
  // The same for the kernels that write a block matmul's output gradient,
  // for backward's dout_row_amax: one buffer for the residual stream's
  // gradient (RMSNorm's backward, tensor_parallel_sites.h), another for the
  // hidden gradients (SwiGLU's backward), so that neither writer overwrites
  // the other's amaxes before their matmul reads them.
  float* residual_grad_row_amax() const { return fused_amax_ ? grad_row_amax_ : nullptr; }
  float* hidden_grad_row_amax() const {
    return fused_amax_ && grad_row_amax_ ? grad_row_amax_ + rows_ : nullptr;
  }
  // Off: every FP8 input's and output gradient's scale from its own amax
  // pass, forward and backward, as before the fusion
  // (Transformer::set_fp8_fused_amax).
  void set_fused_amax(bool on) { fused_amax_ = on; }
  // What the writer of the forward input of block `block`'s first matrix
  // after table row `row` (the matrix that reads it) writes beside it:
  // input_row_amax(), and under delayed scaling with scales set the codes
  // and the scale (forward then casts nothing).
  Fp8InputCast input_cast(int block, int row) const;

  // precision fp8, delayed scaling: the FP8 forward inputs' slots, the
  // stage's blocks times the matrices of a block.
  int delayed_inputs() const { return static_cast<int>(weights_.size() * matrices_per_block_); }
  int matrices_per_block() const { return static_cast<int>(matrices_per_block_); }
  // From now on (an optimizer step) each slot's scale is
  // fp8_scale_from_amax(amax[slot]), or (amax null: the history is empty)
  // each input's own, as under current scaling; every slot's running amax
  // is zeroed. Waits for the device's queued work.
  void begin_delayed_step(const float* amax);
  // The running amaxes since begin_delayed_step (delayed_inputs() floats).
  void read_step_amax(float* out) const;
  // begin_delayed_step set scales: the forward runs delayed scaling's kernels.
  bool has_delayed_scales() const { return delayed_scales_; }

  // out (N, OC) = inp (N, K) @ weight (OC, K)^T (+ residual when not null).
  // inp_row_amax (N), when not null: the amax of each row of inp, which its
  // writer left in input_row_amax() (used by the FP8 path; else ignored);
  // under delayed scaling with scales set, its writer left inp's codes too
  // (input_cast).
  void forward(A* out, const A* inp, Weight weight, const A* residual, int N, int K, int OC,
               const float* inp_row_amax = nullptr);
  // dinp (N, K) = dout (N, OC) @ weight (when dinp is not null), dweight
  // (OC, K) += dout^T inp. inp is the forward's input, bit for bit (also
  // when recomputed), so under FP8 it is cast with the forward's scale
  // (unless the fused amax is off under current scaling). dout_row_amax (N), when not null: the
  // amax of each row of dout, which its writer left in one of the
  // *_grad_row_amax() buffers.
  void backward(A* dinp, float* dweight, const A* dout, const A* inp, Weight weight, int N, int K,
                int OC, const float* dout_row_amax = nullptr);

 private:
  enum ScaleSlot { kInputScale, kGradScale, kScales };
  // The FP8 codes of x (rows, cols) scaled into `scale`: row-major into
  // codes and/or transposed into codes_t (either may be null); the scale
  // from x's row amaxes when given (x_row_amax), else from x.
  void quantize(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                Fp8Scale* scale, Fp8Format format, const float* x_row_amax = nullptr);

  const Backend& backend_;
  const TypedOps<A>& ops_;
  const TypedOps<float>& f32_;
  const std::vector<size_t>& offsets_;
  bool fp8_;
  Fp8Accumulation forward_accumulation_ = Fp8Accumulation::promoted;
  bool fused_amax_ = true;
  bool delayed_ = false;                 // begin_delayed_step called: the forward records amaxes
  bool delayed_scales_ = false;          // and set the scales
  size_t widest_input_, widest_output_;  // of the block matmuls: K and OC
  size_t rows_ = 0;                      // N of the plan
  size_t matrices_per_block_ = 0;
  // precision fp8: one matmul's activation codes (forward: the input
  // row-major; backward: the output gradient both ways and the input
  // transposed), their scales, the input's and the output gradients' row
  // amaxes as their writers left them, every block weight's codes, and the
  // parameter version each block's were cast at.
  uint8_t* input_ = nullptr;   // (N, K) forward, (K, N) backward
  uint8_t* grad_ = nullptr;    // (N, OC) the output gradient (e5m2)
  uint8_t* grad_t_ = nullptr;  // (OC, N)
  Fp8Scale* scales_ = nullptr;
  float* input_row_amax_ = nullptr;              // (N)
  float* grad_row_amax_ = nullptr;               // (2, N) residual's, then hidden's
  Fp8Scale* delayed_input_scales_ = nullptr;     // (delayed_inputs()) delayed scaling's
  float* step_amax_ = nullptr;                   // (delayed_inputs()) running maxima
  std::vector<std::vector<Fp8Weight>> weights_;  // [block of the stage][its matrix]
  std::vector<std::optional<uint64_t>> cast_version_;
};

}  // namespace llm
