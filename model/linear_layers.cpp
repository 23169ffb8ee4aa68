// The linear layers in A or on FP8 codes (see linear_layers.h).
#include "model/linear_layers.h"

#include <algorithm>
#include <type_traits>

#include "model/block.h"
#include "base/error.h"

namespace llm {

template <class A>
LinearLayers<A>::LinearLayers(const Backend& backend, const ModelConfig& config,
                              const ParameterLayout& layout, bool fp8)
    : backend_(backend),
      ops_(backend.ops<A>()),
      f32_(backend.f32),
      offsets_(layout.block.offsets),
      fp8_(fp8) {
  LLM_CHECK((!fp8_ || std::is_same_v<A, Bf16>), "transformer: fp8 runs on bf16 activations");
  const int tp = layout.slice.tp_size;
  const std::vector<BlockTensorSpec> table = block_tensors(config);
  std::vector<Fp8Weight> matrices;  // a block's, this rank's slice of each
  widest_input_ = widest_output_ = 0;
  for (size_t row = 0; row < table.size(); ++row) {
    const BlockTensorSpec& spec = table[row];
    if (!spec.matrix()) continue;
    const int64_t rows = spec.rows() / (spec.split == TensorParallelSplit::rows ? tp : 1);
    const int64_t cols = spec.columns / (spec.split == TensorParallelSplit::columns ? tp : 1);
    matrices.push_back({static_cast<int>(row), static_cast<int>(rows), static_cast<int>(cols)});
    widest_input_ = std::max(widest_input_, static_cast<size_t>(cols));
    widest_output_ = std::max(widest_output_, static_cast<size_t>(rows));
  }
  matrices_per_block_ = matrices.size();
  if (!fp8_) return;
  weights_.assign(layout.layers.count(), matrices);
  for (size_t block = 0; block < weights_.size(); ++block)
    for (size_t m = 0; m < matrices.size(); ++m)
      weights_[block][m].input = static_cast<int>(block * matrices.size() + m);
  cast_version_.resize(layout.layers.count());
}

template <class A>
void LinearLayers<A>::plan(BufferPlan& plan, size_t N, int slots) {
  if (!fp8_) return;
  rows_ = N;
  plan.add(input_, N * widest_input_);
  plan.add(grad_, N * widest_output_);
  plan.add(grad_t_, N * widest_output_);
  plan.add(scales_, kScales);
  plan.add(input_row_amax_, N);
  plan.add(grad_row_amax_, 2 * N);
  plan.add(delayed_input_scales_, static_cast<size_t>(delayed_inputs()));
  plan.add(step_amax_, static_cast<size_t>(delayed_inputs()));
  for (std::vector<Fp8Weight>& block : weights_) {
    for (Fp8Weight& w : block) {
      const size_t n = static_cast<size_t>(w.rows) * w.cols;
      plan.add(w.codes, n);
      plan.add(w.codes_t, n);
      plan.add(w.scale, 1);
      plan.add(w.input_scales, static_cast<size_t>(slots));
    }
  }
}

template <class A>
typename LinearLayers<A>::Weight LinearLayers<A>::block_weight(int slot, int block, const A* params,
                                                               int row) const {
  Weight weight{params + offsets_[row]};
  if (!fp8_) return weight;
  for (const Fp8Weight& w : weights_[block]) {
    if (w.row != row) continue;
    Fp8Scale* input_scale =
        delayed_scales_ ? delayed_input_scales_ + w.input : w.input_scales + slot;
    weight = {weight.values, &w, input_scale};
  }
  LLM_CHECK(weight.fp8, "transformer: no FP8 codes for a matrix the block table does not hold");
  return weight;
}

template <class A>
Fp8InputCast LinearLayers<A>::input_cast(int block, int row) const {
  Fp8InputCast cast{input_row_amax()};
  if (!cast.row_amax || !delayed_scales_) return cast;
  for (const Fp8Weight& w : weights_[block]) {
    if (w.row <= row) continue;
    cast.codes = input_;
    cast.scale = delayed_input_scales_ + w.input;
    return cast;
  }
  LLM_FAIL("transformer: no block matrix after table row {} reads an FP8 input", row);
}

template <class A>
void LinearLayers<A>::begin_delayed_step(const float* amax) {
  if (!fp8_) return;
  const size_t n = static_cast<size_t>(delayed_inputs());
  delayed_ = true;
  delayed_scales_ = amax != nullptr;
  if (delayed_scales_) {
    std::vector<Fp8Scale> scales(n);
    for (size_t i = 0; i < n; ++i) scales[i] = fp8_scale_from_amax(amax[i], Fp8Format::e4m3);
    backend_.memory->to_device(delayed_input_scales_, scales.data(), n * sizeof(Fp8Scale));
  }
  f32_.fill_zero(step_amax_, n);
}

template <class A>
void LinearLayers<A>::read_step_amax(float* out) const {
  if (!fp8_) return;
  backend_.memory->to_host(out, step_amax_, static_cast<size_t>(delayed_inputs()) * sizeof(float));
}

template <class A>
void LinearLayers<A>::cast_block_weights(int block, const A* params, uint64_t version) {
  if constexpr (std::is_same_v<A, Bf16>) {
    if (!fp8_ || cast_version_[block] == version) return;
    for (const Fp8Weight& w : weights_[block]) {
      const Bf16* values = params + offsets_[w.row];
      backend_.fp8_amax_scale(w.scale, values, static_cast<size_t>(w.rows) * w.cols,
                              Fp8Format::e4m3);
      backend_.fp8_cast_transpose(w.codes, w.codes_t, values, w.rows, w.cols, w.scale,
                                  Fp8Format::e4m3);
    }
    cast_version_[block] = version;
  }
}

template <class A>
void LinearLayers<A>::quantize(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                               Fp8Scale* scale, Fp8Format format, const float* x_row_amax) {
  if (x_row_amax)
    backend_.fp8_scale_from_row_amax(scale, x_row_amax, rows, format);
  else
    backend_.fp8_amax_scale(scale, x, static_cast<size_t>(rows) * cols, format);
  backend_.fp8_cast_transpose(codes, codes_t, x, rows, cols, scale, format);
}

template <class A>
void LinearLayers<A>::forward(A* out, const A* inp, Weight weight, const A* residual, int N, int K,
                              int OC, const float* inp_row_amax) {
  if constexpr (std::is_same_v<A, Bf16>) {
    if (const Fp8Weight* w = weight.fp8) {
      constexpr Fp8Format e4m3 = Fp8Format::e4m3;
      float* step_amax = step_amax_ + w->input;
      if (delayed_scales_) {
        // Row amaxes come with the codes under delayed scaling (input_cast).
        if (inp_row_amax)
          backend_.fp8_amax_fold(step_amax, inp_row_amax, N);
        else
          backend_.fp8_cast_amax(input_, step_amax, inp, static_cast<size_t>(N) * K,
                                 weight.input_scale, e4m3);
      } else {
        quantize(input_, nullptr, inp, N, K, weight.input_scale, e4m3, inp_row_amax);
        if (delayed_) backend_.fp8_amax_fold(step_amax, &weight.input_scale->amax, 1);
      }
      ops_.fp8_gemm(out, residual, input_, e4m3, weight.input_scale, w->codes, e4m3, w->scale, N,
                    OC, K, forward_accumulation_);
      return;
    }
  }
  if (residual)
    ops_.matmul_forward_residual(out, inp, weight.values, residual, N, K, OC);
  else
    ops_.matmul_forward(out, inp, weight.values, N, K, OC);
}

// FP8: the output gradient in e5m2 (its range: docs/training.md), the weight
// and input in e4m3; dinp = dout @ W as (N, OC) . (K, OC)^T, dweight +=
// dout^T inp as (OC, N) . (K, N)^T, both K-contiguous. The input's scale is
// the forward's: the input is the same tensor, bit for bit (the activation
// the forward read, kept or recomputed by the same kernels, under tensor
// parallelism each rank's own, under pipeline parallelism per slot), and
// under delayed scaling the step's scale; with the fused amax off under
// current scaling, an amax pass makes it again.
template <class A>
void LinearLayers<A>::backward(A* dinp, float* dweight, const A* dout, const A* inp, Weight weight,
                               int N, int K, int OC, const float* dout_row_amax) {
  if constexpr (std::is_same_v<A, Bf16>) {
    if (const Fp8Weight* w = weight.fp8) {
      constexpr Fp8Format e4m3 = Fp8Format::e4m3, e5m2 = Fp8Format::e5m2;
      Fp8Scale* grad_scale = scales_ + kGradScale;
      quantize(grad_, grad_t_, dout, N, OC, grad_scale, e5m2, dout_row_amax);
      if (dinp) {
        ops_.fp8_gemm(dinp, nullptr, grad_, e5m2, grad_scale, w->codes_t, e4m3, w->scale, N, K, OC,
                      Fp8Accumulation::promoted);
      }
      const bool amax_pass = !fused_amax_ && !delayed_scales_;
      Fp8Scale* input_scale = amax_pass ? scales_ + kInputScale : weight.input_scale;
      if (amax_pass) backend_.fp8_amax_scale(input_scale, inp, static_cast<size_t>(N) * K, e4m3);
      backend_.fp8_cast_transpose(nullptr, input_, inp, N, K, input_scale, e4m3);
      f32_.fp8_gemm(dweight, dweight, grad_t_, e5m2, grad_scale, input_, e4m3, input_scale, OC, K,
                    N, Fp8Accumulation::promoted);
      return;
    }
  }
  ops_.matmul_backward(dinp, dweight, dout, inp, weight.values, N, K, OC);
}

template class LinearLayers<float>;
template class LinearLayers<Bf16>;

}  // namespace llm
