// The tensor-parallel sites of the transformer (see tensor_parallel_sites.h).
#include "model/tensor_parallel_sites.h"

#include <algorithm>

#include "base/error.h"

namespace llm {

template <class A>
TensorParallelSites<A>::TensorParallelSites(const Backend& backend, const ModelConfig& config,
                                            const RankShape& shape, const ParameterLayout& layout,
                                            Group* tensor, LinearLayers<A>& linear)
    : ops_(backend.ops<A>()),
      f32_(backend.f32),
      config_(config),
      shape_(shape),
      offsets_(layout.block.offsets),
      tensor_(tensor),
      linear_(linear),
      tp_(layout.slice.tp_size),
      rank_(layout.slice.tp_rank),
      gains_(replicated_gains(config)) {}

template <class A>
void TensorParallelSites<A>::plan(BufferPlan& activations, BufferPlan& backward, size_t N) {
  const size_t C = shape_.C;
  if (tp_ > 1) activations.add(partial_, N * C);
  backward.add(dres_full_, N * C);
  backward.add(dxn_, N * C);
  if (tp_ > 1) {
    backward.add(dxn_rows_, N / tp_ * C);
    backward.add(dgains_, gains_width());
  }
}

template <class A>
void TensorParallelSites<A>::bound() {
  if (tp_ == 1)
    dxn_rows_ = dxn_;
  else
    f32_.fill_zero(dgains_, gains_width());  // zero between uses
}

template <class A>
Group& TensorParallelSites<A>::tensor(TensorPayload payload) const {
  tensor_->set_tag(static_cast<int>(payload));
  return *tensor_;
}

template <class A>
void TensorParallelSites<A>::norm_gathered(A* xn, float* rstd, const A* x, const A* weight, int N,
                                           Fp8InputCast cast) {
  LLM_CHECK(!cast.row_amax || tp_ == 1, "transformer: a gathered norm's row amaxes need tp = 1");
  const int n = N / tp_, C = static_cast<int>(shape_.C);
  const float eps = static_cast<float>(config_.norm_eps);
  if (cast.codes)
    ops_.rmsnorm_forward_fp8(own_rows(xn, N), rstd, x, weight, n, C, eps, cast.row_amax, cast.codes,
                             cast.scale);
  else
    ops_.rmsnorm_forward(own_rows(xn, N), rstd, x, weight, n, C, eps, cast.row_amax);
  if (tp_ > 1) {
    tensor(TensorPayload::activation_rows)
        .all_gather(own_rows(xn, N), xn, static_cast<size_t>(n) * C, wire_type());
  }
}

template <class A>
void TensorParallelSites<A>::row_parallel_forward(A* out, const A* inp, Weight weight,
                                                  const A* residual, int N, int K,
                                                  const float* inp_row_amax) {
  const int C = static_cast<int>(shape_.C);
  if (tp_ == 1) {
    linear_.forward(out, inp, weight, residual, N, K, C, inp_row_amax);
    return;
  }
  const size_t rows = static_cast<size_t>(N / tp_) * C;
  linear_.forward(partial_, inp, weight, nullptr, N, K, C, inp_row_amax);
  tensor(TensorPayload::activation_rows).reduce_scatter(partial_, out, rows, wire_type());
  ops_.add_vectors(out, out, residual, rows);
}

template <class A>
const A* TensorParallelSites<A>::gather_dres(int N) {
  if (tp_ > 1) {
    const size_t rows = static_cast<size_t>(N / tp_) * shape_.C;
    tensor(TensorPayload::activation_rows).all_gather(dres_, dres_full_, rows, wire_type());
  }
  return dres_full_;
}

template <class A>
const A* TensorParallelSites<A>::sum_norm_grad_rows(int N) {
  if (tp_ > 1) {
    tensor(TensorPayload::activation_rows)
        .reduce_scatter(dxn_, dxn_rows_, static_cast<size_t>(N / tp_) * shape_.C, wire_type());
  }
  return dxn_rows_;
}

template <class A>
void TensorParallelSites<A>::norm_backward(float* dgain, const A* dxn_rows, const A* x,
                                           const A* gain, const float* rstd, int N) {
  float* row_amax = tp_ == 1 ? linear_.residual_grad_row_amax() : nullptr;
  ops_.rmsnorm_backward(dres_, dgain, dxn_rows, x, gain, rstd, N / tp_, static_cast<int>(shape_.C),
                        row_amax);
  dres_row_amax_ = row_amax;
}

template <class A>
const A* TensorParallelSites<A>::column_parallel_backward(float* dweight, const A* dout,
                                                          const A* inp, Weight weight, int N,
                                                          int out, const float* dout_row_amax) {
  linear_.backward(dxn_, dweight, dout, inp, weight, N, static_cast<int>(shape_.C), out,
                   dout_row_amax);
  return sum_norm_grad_rows(N);
}

template <class A>
float* TensorParallelSites<A>::gain_grad(float* gr, int row) const {
  if (tp_ == 1) return gr + offsets_[row];
  for (const ReplicatedGain& gain : gains_.gains) {
    if (gain.row == row) return dgains_ + gain.at;
  }
  LLM_FAIL("transformer: a gain gradient of a tensor the block table does not hold replicated");
}

template <class A>
void TensorParallelSites<A>::sum_block_gains(float* gr) {
  if (tp_ == 1) return;
  const size_t width = static_cast<size_t>(gains_.width);
  tensor(TensorPayload::block_gain_grads).all_reduce(dgains_, width, WireType::f32);
  for (const ReplicatedGain& gain : gains_.gains) {
    float* grad = gr + offsets_[gain.row];
    f32_.add_vectors(grad, grad, dgains_ + gain.at, static_cast<size_t>(gain.width));
  }
  f32_.fill_zero(dgains_, width);  // zero between uses
}

template <class A>
void TensorParallelSites<A>::sum_final_norm_gain(float* gr) {
  if (tp_ == 1) return;
  tensor(TensorPayload::final_norm_grads).all_reduce(dgains_, shape_.C, WireType::f32);
  f32_.add_vectors(gr, gr, dgains_, shape_.C);
  f32_.fill_zero(dgains_, shape_.C);  // zero between uses
}

template class TensorParallelSites<float>;
template class TensorParallelSites<Bf16>;

}  // namespace llm
