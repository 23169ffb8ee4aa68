// Where the transformer's tensor parallelism (transformer.h) communicates,
// and the residual stream's gradient it moves: a norm's output all-gathered
// before a column-parallel matmul, a row-parallel matmul's partial sums
// reduce-scattered back to rows, the replicated gains' gradients summed over
// the group. Each site is the plain op when the group is one rank.
#pragma once

#include <cstddef>

#include "model/backend.h"
#include "model/block.h"
#include "model/linear_layers.h"
#include "model/tensor_payload.h"
#include "device/arena.h"
#include "collectives/group.h"

namespace llm {

template <class A>
class TensorParallelSites {
 public:
  using Weight = typename LinearLayers<A>::Weight;
  // tensor: the group (null when tp = 1, or to plan memory only).
  TensorParallelSites(const Backend& backend, const ModelConfig& config, const RankShape& shape,
                      const ParameterLayout& layout, Group* tensor, LinearLayers<A>& linear);
  // Its forward buffer (a row-parallel matmul's partial sums) into
  // `activations`, the residual stream's gradient buffers into `backward`,
  // for micro-batches of up to N tokens.
  void plan(BufferPlan& activations, BufferPlan& backward, size_t N);
  // Once the plans are bound.
  void bound();

  static WireType wire_type() { return std::is_same_v<A, Bf16> ? WireType::bf16 : WireType::f32; }
  // The tensor group, its next collective tagged with what it carries.
  Group& tensor(TensorPayload payload) const;
  int rank() const { return rank_; }
  // This rank's rows of an (N, C) buffer.
  A* own_rows(A* full, int N) const {
    return full + static_cast<size_t>(rank_) * (N / shape_.tp) * shape_.C;
  }
  // (N, C) partial sums of a row-parallel matmul (tp > 1; else null).
  A* partial() const { return partial_; }

  // --- forward --------------------------------------------------------------
  // Where norm_gathered writes the amax of each row of xn for the FP8 matmul
  // that reads it (the linear layers' input_row_amax): null unless precision
  // fp8 and tp = 1. Under tensor parallelism each rank norms its own rows and
  // the rows are gathered, so their amax would need a maximum over the group,
  // a collective per norm; the matmul's own amax pass reads the gathered rows.
  // So for the codes of delayed scaling: norm_cast is the linear layers'
  // input_cast for the matrix after the norm at table row `row` when tp = 1,
  // nothing otherwise.
  Fp8InputCast norm_cast(int block, int row) const {
    return tp_ == 1 ? linear_.input_cast(block, row) : Fp8InputCast{};
  }
  // xn (N, C) = rmsnorm of this rank's rows x (n, C), all rows all-gathered;
  // cast (norm_cast's), each row's amax and the codes where it names them.
  void norm_gathered(A* xn, float* rstd, const A* x, const A* weight, int N,
                     Fp8InputCast cast = {});
  // out (n, C) = residual + this rank's rows of inp (N, K) @ W^T summed over
  // the group (a row-parallel matmul, reduce-scattered); inp_row_amax as
  // LinearLayers::forward's (inp is this rank's columns of every row).
  void row_parallel_forward(A* out, const A* inp, Weight weight, const A* residual, int N, int K,
                            const float* inp_row_amax = nullptr);

  // --- backward: the residual stream's gradient -----------------------------
  // (n, C) this rank's rows of d(loss)/d(residual stream), set by start_backward.
  A* dres() const { return dres_; }
  // (N, C) every rank's dres rows, after gather_dres.
  A* dres_full() const { return dres_full_; }
  // (N, C) the gradient of a norm output (partial sums under tp > 1).
  A* dxn() const { return dxn_; }
  // Where the stage's backward of N tokens keeps dres (within dres_full);
  // what is there (the next stage's gradient) has no row amaxes.
  void start_backward(int N) {
    dres_ = own_rows(dres_full_, N);
    dres_row_amax_ = nullptr;
  }
  // dres += the gradient of rmsnorm(x) (N tokens, this rank's n rows) from
  // its output's gradient dxn_rows (this rank's rows), its gain's into dgain;
  // under precision fp8 with tp = 1 (the fused amax on) it leaves the amax of
  // each row of dres in dres_row_amax().
  void norm_backward(float* dgain, const A* dxn_rows, const A* x, const A* gain, const float* rstd,
                     int N);
  // The amax of each of dres_full's N rows, for the FP8 matmul whose output
  // gradient it is (the row-parallel projections): what the last
  // norm_backward left; null after start_backward and unless precision fp8,
  // the fused amax on and tp = 1 (each rank has its own rows' amaxes only,
  // and all-gathering them would cost a collective per matmul). Host state:
  // a replayed device-graph segment does not set it, so a segment run
  // eagerly after one takes the amax pass (the same scale), while a replayed
  // one reads the buffer, which the norm backward before it writes on every
  // run, replayed or not.
  const float* dres_row_amax() const { return dres_row_amax_; }
  // Every rank's dres rows into dres_full; returns it.
  const A* gather_dres(int N);
  // Returns dxn's rows, reduced: this rank's rows of dxn summed over the group.
  const A* sum_norm_grad_rows(int N);
  // A column-parallel matmul's backward: dxn = dout (N, out) @ W, summed to
  // this rank's rows (returned), and dweight += dout^T inp; dout_row_amax
  // as LinearLayers::backward's (dout is this rank's columns of every row).
  const A* column_parallel_backward(float* dweight, const A* dout, const A* inp, Weight weight,
                                    int N, int out, const float* dout_row_amax = nullptr);
  // Where the gradient of the gain at block-table row `row` goes: into the
  // unit's grads `gr`, or (tp > 1) into its place in the gains' buffer, for
  // sum_block_gains.
  float* gain_grad(float* gr, int row) const;
  // tp > 1: the block's replicated gains' gradients (each rank's part of
  // them, for its heads and rows), summed over the group by one collective,
  // added into `gr`; the buffer is zeroed for its next use.
  void sum_block_gains(float* gr);
  // The final norm's gain gradient: into `gr`, through the buffer when tp > 1.
  float* final_norm_grad(float* gr) const { return tp_ == 1 ? gr : dgains_; }
  void sum_final_norm_gain(float* gr);

 private:
  size_t gains_width() const { return std::max<size_t>(shape_.C, gains_.width); }

  const TypedOps<A>& ops_;
  const TypedOps<float>& f32_;
  const ModelConfig& config_;
  const RankShape& shape_;
  const std::vector<size_t>& offsets_;
  Group* tensor_;
  LinearLayers<A>& linear_;
  int tp_, rank_;
  const ReplicatedGains gains_;
  A* partial_ = nullptr;
  A* dres_full_ = nullptr;
  A* dres_ = nullptr;
  const float* dres_row_amax_ = nullptr;  // (N) or null: see dres_row_amax()
  A* dxn_ = nullptr;
  A* dxn_rows_ = nullptr;    // (n, C) dxn's reduced rows (tp > 1; else dxn itself)
  float* dgains_ = nullptr;  // (max(C, gains' width)) replicated gains' gradients (tp > 1)
};

}  // namespace llm
