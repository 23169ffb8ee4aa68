// Forward and backward orchestration of the decoder over its units. All math
// is in the backend's kernels; this file only sequences them, asks the
// UnitProvider for parameters and gradient buffers at unit boundaries, and
// recomputes what the recomputation plan dropped.
// The LM head's logits exist a chunk of rows at a time (loss_chunk_rows):
// in training the head's forward, the cross-entropy and the head's backward
// run chunk by chunk inside the backward pass, so the (N, V) logits are
// never all in memory (docs/memory.md, "The logits in chunks").
// Invariant: a micro-batch queues its work from the upload of its tokens to
// the read-back of its losses without waiting for the device in between
// (parameter and gradient collectives aside, which the UnitProvider orders).
#include "model/transformer.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <type_traits>

#include "runtime/error.h"
#include "model/backend.h"
#include "model/block.h"
#include "model/captured_segments.h"
#include "model/tensor_payload.h"

namespace llm {

RecomputePlan recompute_plan(const TrainingConfig& t) {
  RecomputePlan plan;
  plan.every = t.recompute_every;
  plan.mode = t.recompute;
  return plan;
}

int loss_chunk_rows(const ModelConfig& c, int N, int tp, size_t value_bytes, int requested) {
  if (requested > 0) return std::min(requested, N);
  const size_t row_bytes = static_cast<size_t>(c.vocab_size / tp) * value_bytes;
  size_t rows = std::max<size_t>(kAutoLossChunkBytes / row_bytes, 1);
  if (rows >= 64) rows -= rows % 64;  // whole tiles of a GEMM's rows
  return static_cast<int>(std::min<size_t>(rows, static_cast<size_t>(N)));
}

namespace {

// The sizes one rank works with: N tokens of a micro-batch, n = N / tp of
// them in its residual rows; its share of heads, ffn columns and vocabulary.
struct Shape {
  size_t N, n, C, H, KV, D, F, V, QKV, HD, L;
  int tp;
  Shape(const ModelConfig& c, int B, int T, int tp_size)
      : N(static_cast<size_t>(B) * T),
        n(N / tp_size),
        C(c.dim),
        H(c.n_heads / tp_size),
        KV(c.n_kv_heads / tp_size),
        D(c.resolved_head_dim()),
        F(c.ffn_dim / tp_size),
        V(c.vocab_size / tp_size),
        QKV((H + 2 * KV) * D),
        HD(H * D),
        L(c.n_layers),
        tp(tp_size) {}
};

// One block's activations; for recomputed blocks some point into the shared
// recompute scratch. A is the activation storage type; statistics are fp32.
// Norm outputs hold all N rows (this rank's rows normalized here, the rest
// all-gathered); the residual stream and the norm statistics this rank's n.
template <class A>
struct BlockBuffers {
  A* xn1;          // (N, C) attention-norm output
  float* rstd1;    // (n)
  A* qkv;          // (N, QKV) with RoPE applied to q and k
  A* qkv_raw;      // (N, QKV) the projection before QK-norm (model.qk_norm; else null)
  float* rstd_qk;  // (N, H + KV) QK-norm's statistics (model.qk_norm; else null)
  A* att;          // (N, H * D) attention output before the projection
  float* lse;      // (B, H, T) softmax log-sum-exp per query
  A* x_mid;        // (n, C) residual stream after attention
  A* xn2;          // (N, C) MLP-norm output
  float* rstd2;    // (n)
  A* h13;          // (N, 2F) [gate | up]
  A* g;            // (N, F) silu(gate) * up
};
// What one micro-batch in flight holds (one activation slot).
template <class A>
struct SlotBuffers {
  std::vector<BlockBuffers<A>> blocks;  // the stage's blocks: [i] is block layers.begin + i
  A* residual;  // (layers + 1, n, C): [i] is the input of the stage's block i, [layers] the last
                // output
  int32_t* inputs;  // (N) the micro-batch's tokens, copied to the device (first stage only)
  // With document masking (else null; in their own arena): per token, the
  // position its document starts at in its sequence, and its RoPE position
  // (null unless positions reset).
  int32_t* doc_start = nullptr;  // (N)
  int32_t* positions = nullptr;  // (N)
  // Last stage only (else null):
  int32_t* targets;  // (N)
  A* xf;             // (N, C) final-norm output
  float* rstd_f;     // (n)
  float dloss = 0;   // the stage_forward's dloss: the head's backward forms the loss then
};
// What the slots share.
template <class A>
struct SharedBuffers {
  // Last stage only (else null); R = loss_chunk_rows rows of the head at a time:
  A* logits;        // (R, V) a chunk's logits; become their gradient when training
  float* ce_parts;  // (tp, R, 2) every rank's (log-sum-exp, target logit) per chunk row
  float* losses;    // (N)
  float* rope_cos;  // (T, D / 2)
  float* rope_sin;  // (T, D / 2)
  A* partial;       // (N, C) a row-parallel matmul's partial sums (tp > 1, else null)
  A* gathered_row;  // (tp * V) one row of logits gathered over the groups (tp or pp > 1, else null)
};
template <class A>
struct GradBuffers {  // backward scratch, reused by every block
  A* dres_full;       // (N, C); this rank's rows are dres, the others all-gathered
  A* dres;            // (n, C) gradient of the residual stream (a view into dres_full)
  A* dxn;             // (N, C) gradient of a norm output (partial sums under tp > 1)
  A* dxn_rows;        // (n, C) its reduced rows (tp > 1; else dxn itself)
  A* dqkv;            // (N, QKV)
  A* dqkv_raw;        // (N, QKV) the gradient before QK-norm (model.qk_norm; else null)
  A* datt;            // (N, H * D)
  A* dh13;            // (N, 2F)
  A* dg;              // (N, F)
  // (max(C, replicated gains' width)) a unit's replicated gains' gradients
  // (block.h's order; the head's final norm: C), summed over the group (tp > 1)
  float* dgains;
};
// precision fp8: one block matrix's e4m3 codes, cast once per parameter
// version (UnitProvider::params_version) and kept across micro-batches and
// passes: row-major for the forward, transposed for the backward's input
// gradient (Hopper's TN GEMMs read both operands K-contiguous).
struct Fp8Weight {
  size_t BlockTensors::*offset;  // the block matrix (block.h's table)
  int rows, cols;                // this rank's slice (OC, K)
  uint8_t* codes = nullptr;      // (rows, cols)
  uint8_t* codes_t = nullptr;    // (cols, rows)
  Fp8Scale* scale = nullptr;
};
// The matrices of a block in block.h's table order, this rank's slice of each.
std::vector<Fp8Weight> fp8_block_matrices(const ModelConfig& c, int tp) {
  std::vector<Fp8Weight> out;
  for (const BlockTensorSpec& spec : block_tensors(c)) {
    if (!spec.matrix()) continue;
    const int64_t rows = spec.rows() / (spec.split == TensorParallelSplit::rows ? tp : 1);
    const int64_t cols = spec.columns / (spec.split == TensorParallelSplit::columns ? tp : 1);
    out.push_back({spec.offset, static_cast<int>(rows), static_cast<int>(cols)});
  }
  return out;
}
// precision fp8: the FP8 codes of one block matmul's activations, reused by
// every block matmul (forward: the input row-major; backward: the output
// gradient both ways and the input transposed), their scales, and every
// block weight's codes.
struct Fp8Buffers {
  uint8_t* input;    // (N, K) forward, (K, N) backward; K the widest of C, H * D, F
  uint8_t* grad;     // (N, OC) the output gradient (e5m2); OC the widest of QKV, C, 2F
  uint8_t* grad_t;   // (OC, N)
  Fp8Scale* scales;  // [kFp8Scales]
  std::vector<std::vector<Fp8Weight>> weights;  // [the stage's block i][its matrix]
};
enum Fp8ScaleSlot { kInputScale, kGradScale, kFp8Scales };

template <class A>
struct Buffers {
  // Every pointer null until planned: the optional buffers stay null.
  std::vector<SlotBuffers<A>> slots;
  BlockBuffers<A> scratch{};
  SharedBuffers<A> shared{};
  GradBuffers<A> grads{};
  Fp8Buffers fp8{};  // all null unless the precision is fp8
};

// Lists every buffer (binding `out`'s slots) and sums the bytes by role.
template <class A>
BufferPlan plan_activations(const ModelConfig& c, int B, int T, ModelSlice slice, int in_flight,
                            RecomputePlan recompute, bool fp8, int loss_chunk, Buffers<A>& out,
                            ActivationBytes& bytes) {
  const int tp = slice.tp_size;
  const Shape s(c, B, T, tp);
  const LayerRange layers = pipeline_stage_layers(c.n_layers, slice.pp_size, slice.pp_rank);
  const bool last = slice.last_stage();
  const size_t N = s.N, n = s.n, C = s.C, F = s.F;
  BufferPlan plan;
  size_t before = 0;
  auto role_bytes = [&]() {
    size_t now = plan.bytes(), added = now - before;
    before = now;
    return added;
  };
  // What a block keeps: the matmul / attention outputs ("expensive", kept
  // unless the block is fully recomputed) and the norm / SwiGLU outputs
  // ("cheap", kept only by blocks that are not recomputed).
  auto plan_block = [&](BufferPlan& p, BlockBuffers<A>& b, bool expensive, bool cheap) {
    if (expensive) {
      p.add(b.qkv, N * s.QKV);
      if (c.qk_norm) {
        p.add(b.qkv_raw, N * s.QKV);
        p.add(b.rstd_qk, N * (s.H + s.KV));
      }
      p.add(b.att, N * s.HD);
      p.add(b.lse, N * s.H);
      p.add(b.x_mid, n * C);
      p.add(b.h13, N * 2 * F);
    }
    if (cheap) {
      p.add(b.xn1, N * C);
      p.add(b.rstd1, n);
      p.add(b.xn2, N * C);
      p.add(b.rstd2, n);
      p.add(b.g, N * F);
    }
  };
  const bool selective = recompute.mode == Recompute::selective;
  {
    BufferPlan kept, recomputed;
    BlockBuffers<A> probe{};
    plan_block(kept, probe, true, true);
    plan_block(recomputed, probe, selective, false);
    bytes.per_block_kept = kept.bytes();
    bytes.per_block_recomputed = recomputed.bytes();
  }
  out.slots.assign(in_flight, SlotBuffers<A>{});
  bool any_recomputed = false;
  for (SlotBuffers<A>& slot : out.slots) {
    slot.blocks.assign(layers.count(), BlockBuffers<A>{});
    for (int l = layers.begin; l < layers.end; ++l) {
      bool recomputed = recompute.recomputes(l);
      any_recomputed = any_recomputed || recomputed;
      plan_block(plan, slot.blocks[l - layers.begin], !recomputed || selective, !recomputed);
    }
  }
  role_bytes();
  if (any_recomputed) {  // selective blocks keep their expensive outputs themselves
    plan_block(plan, out.scratch, !selective, true);
    bytes.recompute_scratch = role_bytes();
  }

  for (SlotBuffers<A>& slot : out.slots) plan.add(slot.residual, (layers.count() + 1) * n * C);
  bytes.residual_stream = role_bytes();
  for (SlotBuffers<A>& slot : out.slots) {
    if (slice.first_stage()) plan.add(slot.inputs, N);
    if (!last) continue;
    plan.add(slot.targets, N);
    plan.add(slot.xf, N * C);
    plan.add(slot.rstd_f, n);
  }
  SharedBuffers<A>& h = out.shared;
  if (last) {
    const size_t rows = loss_chunk_rows(c, static_cast<int>(N), tp, sizeof(A), loss_chunk);
    plan.add(h.logits, rows * s.V);
    plan.add(h.ce_parts, tp * rows * 2);
    plan.add(h.losses, N);
  }
  plan.add(h.rope_cos, T * s.D / 2);
  plan.add(h.rope_sin, T * s.D / 2);
  if (tp > 1) plan.add(h.partial, N * C);
  if (tp > 1 || slice.pp_size > 1) plan.add(h.gathered_row, tp * s.V);
  bytes.head_and_loss = role_bytes();
  GradBuffers<A>& g = out.grads;
  plan.add(g.dres_full, N * C);
  plan.add(g.dxn, N * C);
  if (tp > 1) {
    plan.add(g.dxn_rows, n * C);
    plan.add(g.dgains, std::max<size_t>(C, replicated_gains(c).width));
  }
  plan.add(g.dqkv, N * s.QKV);
  if (c.qk_norm) {
    plan.add(g.dqkv_raw, N * s.QKV);
  }
  plan.add(g.datt, N * s.HD);
  plan.add(g.dh13, N * 2 * F);
  plan.add(g.dg, N * F);
  bytes.backward_scratch = role_bytes();
  if (fp8) {
    Fp8Buffers& q = out.fp8;
    const size_t widest_input = std::max({C, s.HD, F}), widest_output = std::max({s.QKV, C, 2 * F});
    plan.add(q.input, N * widest_input);
    plan.add(q.grad, N * widest_output);
    plan.add(q.grad_t, N * widest_output);
    plan.add(q.scales, kFp8Scales);
    q.weights.assign(layers.count(), fp8_block_matrices(c, tp));
    for (std::vector<Fp8Weight>& block : q.weights) {
      for (Fp8Weight& w : block) {
        const size_t n = static_cast<size_t>(w.rows) * w.cols;
        plan.add(w.codes, n);
        plan.add(w.codes_t, n);
        plan.add(w.scale, 1);
      }
    }
    bytes.fp8_copies = role_bytes();
  }
  bytes.total = plan.bytes();
  return plan;
}

template <class A>
class TransformerImpl final : public Transformer {
 public:
  TransformerImpl(const ModelConfig& config, int max_batch, int max_seq, const Backend& backend,
                  RecomputePlan recompute, Precision precision, ModelSplit split, int loss_chunk)
      : Transformer(config, precision, split),
        backend_(backend),
        ops_(backend.ops<A>()),
        f32_(backend.f32),
        memory_(*backend.memory),
        tensor_(split.tensor),
        pipeline_(split.pipeline),
        max_batch_(max_batch),
        max_seq_(max_seq),
        tp_(layout_.slice.tp_size),
        tp_rank_(layout_.slice.tp_rank),
        s_(config, 1, 1, tp_),
        vocab_begin_(static_cast<int>(tp_rank_ * s_.V)),
        layers_(layout_.layers),
        first_(layout_.slice.first_stage()),
        last_(layout_.slice.last_stage()),
        recompute_(recompute),
        fp8_(precision == Precision::fp8),
        loss_rows_(loss_chunk_rows(config, max_batch * max_seq, tp_, sizeof(A), loss_chunk)) {
    LLM_CHECK((!fp8_ || std::is_same_v<A, Bf16>), "transformer: fp8 runs on bf16 activations");
    LLM_CHECK(tp_ == 1 || (tensor_ && tensor_->size() == tp_ && tensor_->rank() == tp_rank_),
              "transformer: the layout's tensor slice {} of {} is not the tensor group's rank",
              tp_rank_, tp_);
    LLM_CHECK(max_seq % tp_ == 0,
              "transformer: max_seq {} is not a multiple of the tensor-parallel size {}", max_seq,
              tp_);

    BufferPlan plan = plan_activations(config, max_batch, max_seq, layout_.slice, split.in_flight,
                                       recompute, fp8_, loss_chunk, buf_, bytes_);
    arena_ = Arena("activations", plan.bytes(), memory_);
    host_losses_.resize(static_cast<size_t>(max_batch) * max_seq);
    host_row_.resize(tp_ * s_.V);
    staging_ = {static_cast<int32_t*>(memory_.allocate_staging(4 * static_cast<size_t>(max_batch) *
                                                               max_seq * sizeof(int32_t))),
                memory_.release_staging};
    plan.bind(arena_);
    // Checkpointed blocks work in the shared scratch for what they do not keep.
    for (SlotBuffers<A>& slot : buf_.slots) {
      for (int l = layers_.begin; l < layers_.end; ++l) {
        if (!recompute.recomputes(l)) continue;
        BlockBuffers<A>& b = slot.blocks[l - layers_.begin];
        const BlockBuffers<A>& sc = buf_.scratch;
        b.xn1 = sc.xn1, b.rstd1 = sc.rstd1, b.xn2 = sc.xn2, b.rstd2 = sc.rstd2, b.g = sc.g;
        if (recompute.mode == Recompute::full) {
          b.qkv = sc.qkv, b.att = sc.att, b.lse = sc.lse, b.x_mid = sc.x_mid, b.h13 = sc.h13;
          b.qkv_raw = sc.qkv_raw, b.rstd_qk = sc.rstd_qk;
        }
      }
    }
    slot_ = &buf_.slots[0];
    fp8_cast_version_.resize(fp8_ ? layers_.count() : 0);
    GradBuffers<A>& d = buf_.grads;
    if (tp_ == 1)
      d.dxn_rows = d.dxn;
    else
      f32_.fill_zero(d.dgains, gains_buffer_width());  // zero between uses
    const RopeScaling scaling{config.rope_scaling_factor, config.rope_low_freq_factor,
                              config.rope_high_freq_factor, config.rope_original_context};
    backend.rope_table(buf_.shared.rope_cos, buf_.shared.rope_sin, max_seq, static_cast<int>(s_.D),
                       static_cast<float>(config.rope_theta), scaling);
  }

  float stage_forward(UnitProvider& units, int slot, const int32_t* inputs, const int32_t* targets,
                      int B, int T, float dloss) override;
  float stage_backward(UnitProvider& units, int slot, int B, int T) override;
  StageMessage stage_input(int slot, int B, int T) const override {
    return stage_rows(buf_.slots.at(slot).residual, B, T);
  }
  StageMessage stage_output(int slot, int B, int T) const override {
    return stage_rows(buf_.slots.at(slot).residual, B, T, layers_.count());
  }
  StageMessage stage_gradient(int B, int T) const override {
    return {own_rows(buf_.grads.dres_full, B * T), static_cast<size_t>(B * T / tp_) * s_.C,
            wire_type()};
  }
  void reserve_kv_cache(int batch, int capacity) override;
  int kv_cache_capacity() const override { return kv_capacity_; }
  void decode_stage(UnitProvider& units, const int32_t* inputs, int B, int T, int start) override;
  void logits_row(UnitProvider& units, int row, float* out) override {
    const SharedBuffers<A>& h = buf_.shared;
    const A* logits = nullptr;
    if (last_) {  // the row's logits from its final-norm output, into the chunk buffer
      const int head = layout_.head_unit();
      const A* weight = head_weight(units, params(units, head, Pass::forward), Pass::forward);
      ops_.matmul_forward(h.logits, slot_->xf + static_cast<size_t>(row) * s_.C, weight, 1,
                          static_cast<int>(s_.C), static_cast<int>(s_.V));
      release_head_weight(units, Pass::forward);
      units.release_params(head, Pass::forward);
      logits = h.logits;
    }
    if (tp_ > 1 && last_) {  // every rank's vocabulary slice, in rank (= vocabulary) order
      tensor(TensorPayload::logits_row).all_gather(logits, h.gathered_row, s_.V, wire_type());
      logits = h.gathered_row;
    }
    if (pipeline_ && pipeline_->size() > 1) {  // the last stage's row, to every stage
      if (logits != h.gathered_row) {
        if (last_) memory_.copy(h.gathered_row, logits, host_row_.size() * sizeof(A));
        logits = h.gathered_row;
      }
      pipeline_->broadcast(h.gathered_row, host_row_.size(), wire_type(), pipeline_->size() - 1);
    }
    memory_.to_host(host_row_.data(), logits, host_row_.size() * sizeof(A));
    staging_in_flight_ = false;  // to_host waited for the device
    for (size_t v = 0; v < host_row_.size(); ++v) out[v] = to_float(host_row_[v]);
  }

 private:
  static WireType wire_type() { return std::is_same_v<A, Bf16> ? WireType::bf16 : WireType::f32; }
  // The tensor group, its next collective tagged with what it carries.
  Group& tensor(TensorPayload payload) const {
    tensor_->set_tag(static_cast<int>(payload));
    return *tensor_;
  }
  // Residual-stream entry `index` of a slot: this rank's rows.
  StageMessage stage_rows(A* residual, int B, int T, int index = 0) const {
    const size_t rows = static_cast<size_t>(B * T / tp_) * s_.C;
    return {residual + static_cast<size_t>(index) * residual_stride(), rows, wire_type()};
  }
  size_t residual_stride() const {
    return static_cast<size_t>(max_batch_) * (max_seq_ / tp_) * s_.C;
  }
  BlockBuffers<A>& block(int l) const { return slot_->blocks[l - layers_.begin]; }
  const A* params(UnitProvider& units, int unit, Pass pass) {
    return static_cast<const A*>(units.acquire_params(unit, pass));
  }
  // Checks the micro-batch's shape and queues the copy of the tokens this
  // stage reads (inputs on the first, targets, when not null, on the last)
  // into the current slot's token buffers.
  void upload_micro_batch(const int32_t* inputs, const int32_t* targets, int B, int T);
  void set_document_masking(DocumentBoundary boundary, bool reset_positions) override;
  void set_device_graphs(bool on) override {
    LLM_CHECK(!on || tp_ == 1,
              "training.cuda_graphs: tensor parallelism's collectives run inside every block, "
              "where a device graph cannot hold them; turn one of the two off");
    segments_.enable(on);
  }
  int device_graphs() const override { return segments_.graphs(); }
  // This stage's forward pass: from the uploaded tokens (first stage) or the
  // received activation, to the stage's output or (last stage) the final
  // norm's output, and with `loss` the losses (evaluation: no gradient).
  void forward_blocks(UnitProvider& units, int B, int T, bool loss);
  // The last stage's backward: the head's logits, the losses and their
  // gradient chunk by chunk, through the LM head and final norm, into dres.
  void head_backward(UnitProvider& units, int B, int T);
  // The first stage's backward of the embedding, from dres.
  void embedding_backward(UnitProvider& units, int B, int T);
  // Rows [row, row + rows) of the head: their logits into shared.logits, then
  // per row the (log-sum-exp, target logit) of every rank and the losses;
  // with dloss != 0 the logits become their gradient.
  void head_chunk(int row, int rows, const A* weight, float dloss);
  // Block l's forward into its buffers; with write_output false it stops
  // after SwiGLU (what backward recomputation needs).
  void block_forward(int l, const A* p, int B, int T, bool write_output);
  void recompute_block(int l, const A* p, int B, int T);
  void block_backward(int l, const A* p, float* grads, int B, int T);

  // --- device graphs (training.cuda_graphs) --------------------------------
  // The segment sites: each unit's forward and backward, then the loss.
  int forward_site(int unit) const { return 2 * unit; }
  int backward_site(int unit) const { return 2 * unit + 1; }
  int loss_site() const { return 2 * static_cast<int>(layout_.units.size()); }
  // Queues `work` (kernels only, between two unit boundaries) as a segment
  // of the current slot (captured_segments.h); `buffers` are the unit
  // buffers it reads or writes. Decoding runs eagerly: its position is host
  // state the key does not hold.
  template <class Work>
  void segment(int site, int B, int T, float dloss, std::array<const void*, 4> buffers,
               Work&& work) {
    if (decode_start_ >= 0) return work();
    const int slot = static_cast<int>(slot_ - buf_.slots.data());
    segments_.run({site, slot, B, T, dloss, buffers}, work);
  }

  // --- the linear layers: in A, or (a block matrix under fp8_) on FP8 codes -
  // A weight (OC, K) and, for a block matrix under fp8_, its FP8 codes.
  struct Weight {
    const A* values;
    const Fp8Weight* fp8 = nullptr;
  };
  // Block l's matrix at `offset`, from its unit's parameters p.
  Weight block_weight(int l, const A* p, size_t BlockTensors::*offset) const;
  // precision fp8: block l's matrices cast from p, unless cast already at the
  // provider's parameter version. Outside the segments: a captured segment
  // replays its kernels whatever the version.
  void cast_block_weights(UnitProvider& units, int l, const A* p);
  // out (N, OC) = inp (N, K) @ weight (OC, K)^T (+ residual when not null).
  void linear_forward(A* out, const A* inp, Weight weight, const A* residual, int N, int K, int OC);
  // dinp (N, K) = dout (N, OC) @ weight, dweight (OC, K) += dout^T inp.
  void linear_backward(A* dinp, float* dweight, const A* dout, const A* inp, Weight weight, int N,
                       int K, int OC);
  // The FP8 codes of x (rows, cols) scaled into scale slot `slot`: row-major
  // into codes and/or transposed into codes_t (either may be null).
  void fp8_quantize(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                    Fp8ScaleSlot slot, Fp8Format format);

  // --- sequence / tensor parallelism; each is a plain op when tp = 1 -------
  // xn (N, C) = rmsnorm of this rank's rows x (n, C), all rows all-gathered.
  void norm_gathered(A* xn, float* rstd, const A* x, const A* weight, int N);
  // out (n, C) = residual + this rank's rows of inp (N, K) @ W^T summed over
  // the group (a row-parallel matmul, reduce-scattered).
  void row_parallel_forward(A* out, const A* inp, Weight weight, const A* residual, int N, int K);
  // dxn_rows (n, C) = this rank's rows of dout (N, out) @ W summed over the
  // group, and dweight += dout^T inp (a block's column-parallel matmul's backward).
  void column_parallel_backward(float* dweight, const A* dout, const A* inp, Weight weight, int N,
                                int out);
  // grads.dxn_rows = this rank's rows of grads.dxn (N, C) summed over the group.
  void sum_norm_grad_rows(int N);
  // Every rank's dres rows into grads.dres_full.
  void gather_dres(int N);
  // Where a block gain's gradient goes: into the unit's grads `gr`, or
  // (tp > 1) into its place in grads.dgains, for sum_block_gains.
  float* gain_grad(float* gr, size_t BlockTensors::*tensor) const;
  // tp > 1: the block's replicated gains' gradients (each rank's part of
  // them, for its heads and rows), summed over the group by one collective,
  // added into `gr`; grads.dgains is zeroed for its next use.
  void sum_block_gains(float* gr);
  // The same for the final norm's gain (C, at grads.dgains' start).
  void sum_final_norm_gain(float* gr);
  size_t gains_buffer_width() const {
    return std::max<size_t>(s_.C, static_cast<size_t>(gains_.width));
  }

  // The current slot's input of block l (l = layers_.end: the stage's output).
  A* residual(int l) const {
    return slot_->residual + static_cast<size_t>(l - layers_.begin) * residual_stride();
  }
  // This rank's rows of an (N, C) buffer.
  A* own_rows(A* full, int N) const {
    return full + static_cast<size_t>(tp_rank_) * (N / tp_) * s_.C;
  }
  const A* head_weight(UnitProvider& units, const A* head_params, Pass pass) {
    if (config_.tie_embeddings) return params(units, layout_.embed_unit(), pass);
    return head_params + config_.dim;
  }
  void release_head_weight(UnitProvider& units, Pass pass) {
    if (config_.tie_embeddings) units.release_params(layout_.embed_unit(), pass);
  }
  // Mean of the per-token losses (an ignored target's is 0), summed on the
  // host in token order.
  float mean_loss(int N) {
    memory_.to_host(host_losses_.data(), buf_.shared.losses,
                    static_cast<size_t>(N) * sizeof(float));
    staging_in_flight_ = false;  // to_host waited for the device
    double sum = 0;
    for (int i = 0; i < N; ++i) sum += host_losses_[i];
    return static_cast<float>(sum / N);
  }

  const Backend& backend_;      // its untyped ops (the FP8 casts)
  const TypedOps<A>& ops_;      // the backend's table for storage type A
  const TypedOps<float>& f32_;  // its fp32 table (gradients)
  const DeviceMemory& memory_;
  Group* tensor_;    // the tensor-parallel group (null when tp_ = 1)
  Group* pipeline_;  // the pipeline group (null: one stage)
  int max_batch_, max_seq_;
  int tp_, tp_rank_;
  Shape s_;                                                  // per-token sizes (N, n unused)
  const ReplicatedGains gains_ = replicated_gains(config_);  // a block's, once
  int vocab_begin_;    // first vocabulary row of this rank's slice
  LayerRange layers_;  // this stage's blocks
  bool first_, last_;  // the first / last pipeline stage
  RecomputePlan recompute_;
  bool fp8_;       // the block matmuls on FP8 copies (precision fp8)
  int loss_rows_;  // rows of the LM head's logits at a time (shared.logits)
  // precision fp8: the parameter version each stage block's weights were
  // cast at (none: never).
  std::vector<std::optional<uint64_t>> fp8_cast_version_;
  Buffers<A> buf_;
  SlotBuffers<A>* slot_;  // the slot of the micro-batch being computed
  Arena arena_;
  std::vector<float> host_losses_;   // (max_batch * max_seq)
  mutable std::vector<A> host_row_;  // (V) one row of logits read back for sampling
  // Staging memory (device_memory.h) of the token uploads: inputs, targets,
  // document starts and positions, max_batch * max_seq each; queued without a wait, so a
  // micro-batch runs from its upload to its loss read-back without a host sync. Rewritten only once
  // the device has passed the last upload (a read-back since, or else an explicit synchronize).
  std::unique_ptr<int32_t, void (*)(void*)> staging_{nullptr, nullptr};
  mutable bool staging_in_flight_ = false;
  // Incremental decoding: per block of the stage, its key/value cache
  // (kv_batch_, kv_capacity_, 2 * KV * D), in kv_arena_; decode_start_ is the
  // position of the first token of the forward being decoded (-1: not decoding).
  Arena kv_arena_;
  std::vector<A*> kv_cache_;
  int kv_batch_ = 0, kv_capacity_ = 0;
  int decode_start_ = -1;
  // Document masking: documents start where documents_ says (token -1:
  // off); the slots' doc_start and positions live in doc_arena_.
  DocumentBoundary documents_;
  Arena doc_arena_;
  CapturedSegments segments_{backend_.graphs};
};

template <class A>
void TransformerImpl<A>::fp8_quantize(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows,
                                      int cols, Fp8ScaleSlot slot, Fp8Format format) {
  Fp8Scale* scale = buf_.fp8.scales + slot;
  backend_.fp8_amax_scale(scale, x, static_cast<size_t>(rows) * cols, format);
  backend_.fp8_cast_transpose(codes, codes_t, x, rows, cols, scale, format);
}

template <class A>
typename TransformerImpl<A>::Weight TransformerImpl<A>::block_weight(
    int l, const A* p, size_t BlockTensors::*offset) const {
  Weight weight{p + layout_.block.*offset};
  if (!fp8_) return weight;
  for (const Fp8Weight& w : buf_.fp8.weights[l - layers_.begin]) {
    if (w.offset == offset) weight.fp8 = &w;
  }
  LLM_CHECK(weight.fp8, "transformer: no FP8 codes for a matrix the block table does not hold");
  return weight;
}

template <class A>
void TransformerImpl<A>::cast_block_weights(UnitProvider& units, int l, const A* p) {
  if constexpr (std::is_same_v<A, Bf16>) {
    if (!fp8_) return;
    std::optional<uint64_t>& cast = fp8_cast_version_[l - layers_.begin];
    const uint64_t version = units.params_version();
    if (cast == version) return;
    for (const Fp8Weight& w : buf_.fp8.weights[l - layers_.begin]) {
      const Bf16* values = p + layout_.block.*w.offset;
      backend_.fp8_amax_scale(w.scale, values, static_cast<size_t>(w.rows) * w.cols,
                              Fp8Format::e4m3);
      backend_.fp8_cast_transpose(w.codes, w.codes_t, values, w.rows, w.cols, w.scale,
                                  Fp8Format::e4m3);
    }
    cast = version;
  }
}

template <class A>
void TransformerImpl<A>::linear_forward(A* out, const A* inp, Weight weight, const A* residual,
                                        int N, int K, int OC) {
  if constexpr (std::is_same_v<A, Bf16>) {
    if (const Fp8Weight* w = weight.fp8) {
      const Fp8Buffers& q = buf_.fp8;
      constexpr Fp8Format e4m3 = Fp8Format::e4m3;
      fp8_quantize(q.input, nullptr, inp, N, K, kInputScale, e4m3);
      ops_.fp8_gemm(out, residual, q.input, e4m3, q.scales + kInputScale, w->codes, e4m3, w->scale,
                    N, OC, K);
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
// dout^T inp as (OC, N) . (K, N)^T, both K-contiguous.
template <class A>
void TransformerImpl<A>::linear_backward(A* dinp, float* dweight, const A* dout, const A* inp,
                                         Weight weight, int N, int K, int OC) {
  if constexpr (std::is_same_v<A, Bf16>) {
    if (const Fp8Weight* w = weight.fp8) {
      const Fp8Buffers& q = buf_.fp8;
      constexpr Fp8Format e4m3 = Fp8Format::e4m3, e5m2 = Fp8Format::e5m2;
      fp8_quantize(q.grad, q.grad_t, dout, N, OC, kGradScale, e5m2);
      if (dinp) {
        ops_.fp8_gemm(dinp, nullptr, q.grad, e5m2, q.scales + kGradScale, w->codes_t, e4m3,
                      w->scale, N, K, OC);
      }
      fp8_quantize(nullptr, q.input, inp, N, K, kInputScale, e4m3);
      f32_.fp8_gemm(dweight, dweight, q.grad_t, e5m2, q.scales + kGradScale, q.input, e4m3,
                    q.scales + kInputScale, OC, K, N);
      return;
    }
  }
  ops_.matmul_backward(dinp, dweight, dout, inp, weight.values, N, K, OC);
}

template <class A>
void TransformerImpl<A>::norm_gathered(A* xn, float* rstd, const A* x, const A* weight, int N) {
  const int n = N / tp_, C = static_cast<int>(s_.C);
  ops_.rmsnorm_forward(own_rows(xn, N), rstd, x, weight, n, C,
                       static_cast<float>(config_.norm_eps));
  if (tp_ > 1) {
    tensor(TensorPayload::activation_rows)
        .all_gather(own_rows(xn, N), xn, static_cast<size_t>(n) * C, wire_type());
  }
}

template <class A>
void TransformerImpl<A>::row_parallel_forward(A* out, const A* inp, Weight weight,
                                              const A* residual, int N, int K) {
  const int C = static_cast<int>(s_.C);
  if (tp_ == 1) {
    linear_forward(out, inp, weight, residual, N, K, C);
    return;
  }
  const size_t rows = static_cast<size_t>(N / tp_) * C;
  linear_forward(buf_.shared.partial, inp, weight, nullptr, N, K, C);
  tensor(TensorPayload::activation_rows)
      .reduce_scatter(buf_.shared.partial, out, rows, wire_type());
  ops_.add_vectors(out, out, residual, rows);
}

template <class A>
void TransformerImpl<A>::column_parallel_backward(float* dweight, const A* dout, const A* inp,
                                                  Weight weight, int N, int out) {
  linear_backward(buf_.grads.dxn, dweight, dout, inp, weight, N, static_cast<int>(s_.C), out);
  sum_norm_grad_rows(N);
}

template <class A>
void TransformerImpl<A>::sum_norm_grad_rows(int N) {
  if (tp_ == 1) return;
  const GradBuffers<A>& d = buf_.grads;
  tensor(TensorPayload::activation_rows)
      .reduce_scatter(d.dxn, d.dxn_rows, static_cast<size_t>(N / tp_) * s_.C, wire_type());
}

template <class A>
void TransformerImpl<A>::gather_dres(int N) {
  if (tp_ == 1) return;
  const size_t rows = static_cast<size_t>(N / tp_) * s_.C;
  tensor(TensorPayload::activation_rows)
      .all_gather(buf_.grads.dres, buf_.grads.dres_full, rows, wire_type());
}

template <class A>
float* TransformerImpl<A>::gain_grad(float* gr, size_t BlockTensors::*tensor) const {
  if (tp_ == 1) return gr + layout_.block.*tensor;
  for (const ReplicatedGain& gain : gains_.gains) {
    if (gain.offset == tensor) return buf_.grads.dgains + gain.at;
  }
  LLM_FAIL("transformer: a gain gradient of a tensor the block table does not hold replicated");
}

template <class A>
void TransformerImpl<A>::sum_block_gains(float* gr) {
  if (tp_ == 1) return;
  float* dgains = buf_.grads.dgains;
  const size_t width = static_cast<size_t>(gains_.width);
  tensor(TensorPayload::block_gain_grads).all_reduce(dgains, width, WireType::f32);
  for (const ReplicatedGain& gain : gains_.gains) {
    float* grad = gr + layout_.block.*gain.offset;
    f32_.add_vectors(grad, grad, dgains + gain.at, static_cast<size_t>(gain.width));
  }
  f32_.fill_zero(dgains, width);  // zero between uses
}

template <class A>
void TransformerImpl<A>::sum_final_norm_gain(float* gr) {
  if (tp_ == 1) return;
  float* dgains = buf_.grads.dgains;
  tensor(TensorPayload::final_norm_grads).all_reduce(dgains, s_.C, WireType::f32);
  f32_.add_vectors(gr, gr, dgains, s_.C);
  f32_.fill_zero(dgains, s_.C);  // zero between uses
}

template <class A>
void TransformerImpl<A>::block_forward(int l, const A* p, int B, int T, bool write_output) {
  const int N = B * T, C = static_cast<int>(s_.C), H = static_cast<int>(s_.H);
  const int KV = static_cast<int>(s_.KV), D = static_cast<int>(s_.D);
  const int QKV = static_cast<int>(s_.QKV), F = static_cast<int>(s_.F);
  const BlockBuffers<A>& b = block(l);
  const A* x = residual(l);
  norm_gathered(b.xn1, b.rstd1, x, p + layout_.block.attn_norm, N);
  if (config_.qk_norm) {
    linear_forward(b.qkv_raw, b.xn1, block_weight(l, p, &BlockTensors::wqkv), nullptr, N, C, QKV);
    ops_.qk_norm_forward(b.qkv, b.rstd_qk, b.qkv_raw, p + layout_.block.q_norm,
                         p + layout_.block.k_norm, N, H, KV, D,
                         static_cast<float>(config_.norm_eps));
  } else {
    linear_forward(b.qkv, b.xn1, block_weight(l, p, &BlockTensors::wqkv), nullptr, N, C, QKV);
  }
  // Decoding, row t is at position decode_start_ + t: the tables from there.
  const size_t first_angle = static_cast<size_t>(std::max(decode_start_, 0)) * (D / 2);
  const bool decoding = decode_start_ >= 0;  // one sequence: no document mask
  ops_.rope_forward(b.qkv, buf_.shared.rope_cos + first_angle, buf_.shared.rope_sin + first_angle,
                    decoding ? nullptr : slot_->positions, N, T, H + KV, D, QKV);
  if (decode_start_ >= 0) {
    A* cache = kv_cache_[l - layers_.begin];
    ops_.kv_cache_write(cache, b.qkv, B, T, decode_start_, H, KV, D, kv_capacity_);
    ops_.attention_cached(b.att, b.qkv, cache, B, T, decode_start_, H, KV, D, kv_capacity_);
  } else {
    ops_.attention_forward(b.att, b.lse, b.qkv, slot_->doc_start, B, T, H, KV, D);
  }
  row_parallel_forward(b.x_mid, b.att, block_weight(l, p, &BlockTensors::wo), x, N, H * D);

  norm_gathered(b.xn2, b.rstd2, b.x_mid, p + layout_.block.mlp_norm, N);
  linear_forward(b.h13, b.xn2, block_weight(l, p, &BlockTensors::w13), nullptr, N, C, 2 * F);
  ops_.swiglu_forward(b.g, b.h13, N, F);
  if (!write_output) return;
  row_parallel_forward(residual(l + 1), b.g, block_weight(l, p, &BlockTensors::w2), b.x_mid, N, F);
}

template <class A>
void TransformerImpl<A>::recompute_block(int l, const A* p, int B, int T) {
  if (!recompute_.recomputes(l)) return;
  if (recompute_.mode == Recompute::full) {
    block_forward(l, p, B, T, /*write_output=*/false);
    return;
  }
  // Selective: the norms and SwiGLU, from the kept x_mid and h13.
  const int N = B * T;
  const BlockBuffers<A>& b = block(l);
  norm_gathered(b.xn1, b.rstd1, residual(l), p + layout_.block.attn_norm, N);
  norm_gathered(b.xn2, b.rstd2, b.x_mid, p + layout_.block.mlp_norm, N);
  ops_.swiglu_forward(b.g, b.h13, N, static_cast<int>(s_.F));
}

template <class A>
void TransformerImpl<A>::block_backward(int l, const A* p, float* gr, int B, int T) {
  const int N = B * T, n = N / tp_, C = static_cast<int>(s_.C), H = static_cast<int>(s_.H);
  const int KV = static_cast<int>(s_.KV), D = static_cast<int>(s_.D);
  const int QKV = static_cast<int>(s_.QKV), F = static_cast<int>(s_.F);
  const BlockBuffers<A>& b = block(l);
  const GradBuffers<A>& d = buf_.grads;
  // MLP branch; dres holds d(loss)/d(block output) and becomes d/d(x_mid).
  gather_dres(N);
  linear_backward(d.dg, gr + layout_.block.w2, d.dres_full, b.g,
                  block_weight(l, p, &BlockTensors::w2), N, F, C);
  ops_.swiglu_backward(d.dh13, d.dg, b.h13, N, F);
  column_parallel_backward(gr + layout_.block.w13, d.dh13, b.xn2,
                           block_weight(l, p, &BlockTensors::w13), N, 2 * F);
  ops_.rmsnorm_backward(d.dres, gain_grad(gr, &BlockTensors::mlp_norm), d.dxn_rows, b.x_mid,
                        p + layout_.block.mlp_norm, b.rstd2, n, C);
  // Attention branch; dres becomes d(loss)/d(block input).
  gather_dres(N);
  linear_backward(d.datt, gr + layout_.block.wo, d.dres_full, b.att,
                  block_weight(l, p, &BlockTensors::wo), N, H * D, C);
  ops_.attention_backward(d.dqkv, d.datt, b.qkv, b.att, b.lse, slot_->doc_start, B, T, H, KV, D);
  ops_.rope_backward(d.dqkv, buf_.shared.rope_cos, buf_.shared.rope_sin, slot_->positions, N, T,
                     H + KV, D, QKV);
  const A* dprojected = d.dqkv;
  if (config_.qk_norm) {
    // Each rank's heads give part of the gains' gradients (sum_block_gains).
    ops_.qk_norm_backward(d.dqkv_raw, gain_grad(gr, &BlockTensors::q_norm),
                          gain_grad(gr, &BlockTensors::k_norm), d.dqkv, b.qkv_raw,
                          p + layout_.block.q_norm, p + layout_.block.k_norm, b.rstd_qk, N, H, KV,
                          D);
    dprojected = d.dqkv_raw;
  }
  column_parallel_backward(gr + layout_.block.wqkv, dprojected, b.xn1,
                           block_weight(l, p, &BlockTensors::wqkv), N, QKV);
  ops_.rmsnorm_backward(d.dres, gain_grad(gr, &BlockTensors::attn_norm), d.dxn_rows, residual(l),
                        p + layout_.block.attn_norm, b.rstd1, n, C);
  sum_block_gains(gr);
}

template <class A>
void TransformerImpl<A>::upload_micro_batch(const int32_t* inputs, const int32_t* targets, int B,
                                            int T) {
  LLM_CHECK(B >= 1 && B <= max_batch_ && T >= 1 && T <= max_seq_,
            "micro-batch ({}, {}) exceeds the activation buffers ({}, {})", B, T, max_batch_,
            max_seq_);
  LLM_CHECK(T % tp_ == 0,
            "micro-batch sequence length {} is not a multiple of the tensor-parallel size {}", T,
            tp_);
  if (staging_in_flight_) memory_.synchronize();
  const size_t N = static_cast<size_t>(B) * T,
               max_tokens = static_cast<size_t>(max_batch_) * max_seq_;
  int32_t* staged_inputs = staging_.get();
  int32_t* staged_targets = staged_inputs + max_tokens;
  if (first_) {
    std::copy_n(inputs, N, staged_inputs);
    memory_.to_device_async(slot_->inputs, staged_inputs, N * sizeof(int32_t));
    staging_in_flight_ = true;
  }
  if (last_ && targets) {
    std::copy_n(targets, N, staged_targets);
    memory_.to_device_async(slot_->targets, staged_targets, N * sizeof(int32_t));
    staging_in_flight_ = true;
  }
  if (documents_.token < 0) return;
  // Every stage's attention needs the documents: each reads the inputs.
  LLM_CHECK(inputs, "transformer: document masking needs the micro-batch's tokens on every stage");
  int32_t* starts = staged_targets + max_tokens;
  int32_t* positions = starts + max_tokens;
  for (size_t n = 0; n < N; ++n) {
    const int t = static_cast<int>(n % T);
    const int32_t* row = inputs + (n - static_cast<size_t>(t));
    starts[n] = t == 0 ? 0 : documents_.starts_at(row, static_cast<size_t>(t)) ? t : starts[n - 1];
    positions[n] = t - starts[n];
  }
  memory_.to_device_async(slot_->doc_start, starts, N * sizeof(int32_t));
  if (slot_->positions) memory_.to_device_async(slot_->positions, positions, N * sizeof(int32_t));
  staging_in_flight_ = true;
}

template <class A>
void TransformerImpl<A>::set_document_masking(DocumentBoundary boundary, bool reset_positions) {
  LLM_CHECK(boundary.token >= 0 && documents_.token < 0,
            "transformer: document masking needs a boundary token >= 0, once (got {})",
            boundary.token);
  const size_t N = static_cast<size_t>(max_batch_) * max_seq_;
  BufferPlan plan;
  for (SlotBuffers<A>& slot : buf_.slots) {
    plan.add(slot.doc_start, N);
    if (reset_positions) plan.add(slot.positions, N);
  }
  doc_arena_ = Arena("document masks", plan.bytes(), memory_);
  plan.bind(doc_arena_);
  documents_ = boundary;
}

template <class A>
void TransformerImpl<A>::forward_blocks(UnitProvider& units, int B, int T, bool loss) {
  const int N = B * T, C = static_cast<int>(s_.C), V = static_cast<int>(s_.V);
  const SharedBuffers<A>& h = buf_.shared;
  if (first_) {
    // Vocabulary-parallel embedding: each rank embeds the tokens of its
    // vocabulary rows (zeros elsewhere), reduce-scattered to token rows.
    const int embed_unit = layout_.embed_unit();
    const A* embed = params(units, embed_unit, Pass::forward);
    segment(forward_site(embed_unit), B, T, 0, {embed}, [&] {
      A* embedded = tp_ == 1 ? residual(layers_.begin) : h.partial;
      ops_.embedding_forward(embedded, slot_->inputs, embed, N, C, vocab_begin_, V);
      if (tp_ > 1) {
        tensor(TensorPayload::activation_rows)
            .reduce_scatter(h.partial, residual(layers_.begin), static_cast<size_t>(N / tp_) * C,
                            wire_type());
      }
    });
    units.release_params(embed_unit, Pass::forward);
  }

  for (int l = layers_.begin; l < layers_.end; ++l) {
    const int unit = layout_.block_unit(l);
    const A* p = params(units, unit, Pass::forward);
    cast_block_weights(units, l, p);
    segment(forward_site(unit), B, T, 0, {p},
            [&] { block_forward(l, p, B, T, /*write_output=*/true); });
    units.release_params(unit, Pass::forward);
  }
  if (!last_) return;

  // The final norm; the weight only for the losses (evaluation), a chunk of
  // rows' logits at a time.
  const int head = layout_.head_unit();
  const A* hp = params(units, head, Pass::forward);
  segment(forward_site(head), B, T, 0, {hp},
          [&] { norm_gathered(slot_->xf, slot_->rstd_f, residual(layers_.end), hp, N); });
  if (loss) {
    const A* weight = head_weight(units, hp, Pass::forward);
    segment(loss_site(), B, T, 0, {hp, weight}, [&] {
      for (int row = 0; row < N; row += loss_rows_)
        head_chunk(row, std::min(loss_rows_, N - row), weight, 0.0f);
    });
    release_head_weight(units, Pass::forward);
  }
  units.release_params(head, Pass::forward);
}

template <class A>
void TransformerImpl<A>::head_chunk(int row, int rows, const A* weight, float dloss) {
  const SharedBuffers<A>& h = buf_.shared;
  const int C = static_cast<int>(s_.C), V = static_cast<int>(s_.V);
  const int32_t* targets = slot_->targets + row;
  ops_.matmul_forward(h.logits, slot_->xf + static_cast<size_t>(row) * C, weight, rows, C, V);
  float* own = h.ce_parts + static_cast<size_t>(tp_rank_) * rows * 2;
  ops_.cross_entropy_partials(own, h.logits, targets, rows, V, vocab_begin_);
  if (tp_ > 1) {
    tensor(TensorPayload::loss_parts)
        .all_gather(own, h.ce_parts, static_cast<size_t>(rows) * 2, WireType::f32);
  }
  ops_.cross_entropy_combine(h.losses + row, dloss != 0 ? h.logits : nullptr, h.ce_parts, targets,
                             rows, V, vocab_begin_, tp_, dloss);
}

template <class A>
float TransformerImpl<A>::stage_forward(UnitProvider& units, int slot, const int32_t* inputs,
                                        const int32_t* targets, int B, int T, float dloss) {
  LLM_CHECK(slot >= 0 && slot < static_cast<int>(buf_.slots.size()),
            "transformer: activation slot {} of {}", slot, buf_.slots.size());
  LLM_CHECK(dloss == 0 || targets || !last_, "transformer: training needs targets");
  slot_ = &buf_.slots[slot];
  slot_->dloss = dloss;
  upload_micro_batch(inputs, targets, B, T);
  // Training forms the losses with the head's backward (stage_backward).
  const bool evaluate = last_ && targets && dloss == 0;
  forward_blocks(units, B, T, evaluate);
  return evaluate ? mean_loss(B * T) : 0.0f;
}

template <class A>
void TransformerImpl<A>::reserve_kv_cache(int batch, int capacity) {
  if (!kv_cache_.empty() && batch <= kv_batch_ && capacity <= kv_capacity_) return;
  LLM_CHECK(kv_cache_.empty(), "transformer: the key/value cache is already reserved for ({}, {})",
            kv_batch_, kv_capacity_);
  LLM_CHECK(batch >= 1 && batch <= max_batch_ && capacity >= 1 && capacity <= max_seq_,
            "transformer: a key/value cache of ({}, {}) exceeds the activation buffers ({}, {})",
            batch, capacity, max_batch_, max_seq_);
  const size_t per_block = static_cast<size_t>(batch) * capacity * 2 * s_.KV * s_.D;
  BufferPlan plan;
  kv_cache_.resize(layers_.count());
  for (A*& cache : kv_cache_) plan.add(cache, per_block);
  kv_arena_ = Arena("kv cache", plan.bytes(), memory_);
  plan.bind(kv_arena_);
  kv_batch_ = batch;
  kv_capacity_ = capacity;
}

template <class A>
void TransformerImpl<A>::decode_stage(UnitProvider& units, const int32_t* inputs, int B, int T,
                                      int start) {
  LLM_CHECK(!kv_cache_.empty() || layers_.count() == 0,
            "transformer: decode needs reserve_kv_cache first");
  LLM_CHECK(
      B <= kv_batch_ && start >= 0 && start + T <= kv_capacity_,
      "transformer: decoding {} x {} tokens at position {} exceeds the key/value cache ({}, {})", B,
      T, start, kv_batch_, kv_capacity_);
  slot_ = &buf_.slots[0];
  upload_micro_batch(inputs, nullptr, B, T);
  decode_start_ = start;
  forward_blocks(units, B, T, /*loss=*/false);
  decode_start_ = -1;
}

template <class A>
void TransformerImpl<A>::head_backward(UnitProvider& units, int B, int T) {
  const int N = B * T, n = N / tp_, C = static_cast<int>(s_.C), V = static_cast<int>(s_.V);
  const GradBuffers<A>& d = buf_.grads;
  // The final norm and LM head (its weight may be the tied embedding).
  const int head = layout_.head_unit();
  const A* hp = params(units, head, Pass::backward);
  float* hg = units.acquire_grads(head);
  float* head_weight_grad =
      config_.tie_embeddings ? units.acquire_grads(layout_.embed_unit()) : hg + C;
  const A* weight = head_weight(units, hp, Pass::backward);
  // The forward's dloss is in the segment's key: its loss kernels scale by it.
  segment(backward_site(head), B, T, slot_->dloss, {hp, hg, head_weight_grad, weight}, [&] {
    for (int row = 0; row < N; row += loss_rows_) {
      const int rows = std::min(loss_rows_, N - row);
      const size_t first = static_cast<size_t>(row) * C;
      head_chunk(row, rows, weight, slot_->dloss);
      linear_backward(d.dxn + first, head_weight_grad, buf_.shared.logits, slot_->xf + first,
                      Weight{weight}, rows, C, V);
    }
    sum_norm_grad_rows(N);
    ops_.fill_zero(d.dres, static_cast<size_t>(n) * C);
    ops_.rmsnorm_backward(d.dres, tp_ == 1 ? hg : d.dgains, d.dxn_rows, residual(layers_.end), hp,
                          slot_->rstd_f, n, C);
    sum_final_norm_gain(hg);
  });
  release_head_weight(units, Pass::backward);
  units.release_params(head, Pass::backward);
  units.release_grads(head);
}

template <class A>
float TransformerImpl<A>::stage_backward(UnitProvider& units, int slot, int B, int T) {
  slot_ = &buf_.slots.at(slot);
  const int N = B * T;
  GradBuffers<A>& d = buf_.grads;
  d.dres = own_rows(d.dres_full, N);  // the next stage's gradient arrived here (not last)
  if (last_) head_backward(units, B, T);

  for (int l = layers_.end - 1; l >= layers_.begin; --l) {
    const int unit = layout_.block_unit(l);
    const A* p = params(units, unit, Pass::backward);
    float* gr = units.acquire_grads(unit);
    cast_block_weights(units, l, p);  // a no-op after this step's forward
    segment(backward_site(unit), B, T, 0, {p, gr}, [&] {
      recompute_block(l, p, B, T);
      block_backward(l, p, gr, B, T);
    });
    units.release_params(unit, Pass::backward);
    units.release_grads(unit);
  }
  if (first_) embedding_backward(units, B, T);  // else dres goes to the previous stage
  // Read once the whole backward is queued.
  return last_ ? mean_loss(N) : 0.0f;
}

template <class A>
void TransformerImpl<A>::embedding_backward(UnitProvider& units, int B, int T) {
  const int N = B * T, C = static_cast<int>(s_.C), V = static_cast<int>(s_.V);
  const GradBuffers<A>& d = buf_.grads;
  // Each rank's vocabulary rows take the gradient of every token row (the
  // gather inside the embedding's gradient window: it is the embedding's
  // backward, as the tensor-parallel recording sees it).
  float* eg = units.acquire_grads(layout_.embed_unit());
  segment(backward_site(layout_.embed_unit()), B, T, 0, {eg}, [&] {
    gather_dres(N);
    ops_.embedding_backward(eg, d.dres_full, slot_->inputs, N, C, vocab_begin_, V);
  });
  units.release_grads(layout_.embed_unit());
}

}  // namespace

Transformer::Transformer(const ModelConfig& config, Precision precision, ModelSplit split)
    : config_(config),
      layout_(layout_build(
          config, {split.tensor ? split.tensor->rank() : 0, split.tensor ? split.tensor->size() : 1,
                   split.pipeline ? split.pipeline->rank() : 0,
                   split.pipeline ? split.pipeline->size() : 1})),
      precision_(precision),
      split_(split) {
  LLM_CHECK(split.in_flight >= 1, "transformer: {} micro-batches in flight", split.in_flight);
}

std::unique_ptr<Transformer> Transformer::create(const ModelConfig& config, int max_batch,
                                                 int max_seq, const Backend& backend,
                                                 RecomputePlan recompute, Precision precision,
                                                 ModelSplit split, int loss_chunk_tokens) {
  if (stores_bf16(precision))
    return std::make_unique<TransformerImpl<Bf16>>(config, max_batch, max_seq, backend, recompute,
                                                   precision, split, loss_chunk_tokens);
  return std::make_unique<TransformerImpl<float>>(config, max_batch, max_seq, backend, recompute,
                                                  precision, split, loss_chunk_tokens);
}

ActivationBytes Transformer::activation_bytes(const ModelConfig& config, int B, int T,
                                              RecomputePlan recompute, Precision precision,
                                              ModelSlice slice, int in_flight,
                                              int loss_chunk_tokens) {
  ActivationBytes bytes;
  const bool fp8 = precision == Precision::fp8;
  if (stores_bf16(precision)) {
    Buffers<Bf16> unbound;
    plan_activations(config, B, T, slice, in_flight, recompute, fp8, loss_chunk_tokens, unbound,
                     bytes);
  } else {
    Buffers<float> unbound;
    plan_activations(config, B, T, slice, in_flight, recompute, fp8, loss_chunk_tokens, unbound,
                     bytes);
  }
  return bytes;
}

template <class StageForward>
float Transformer::through_pipeline(int B, int T, bool with_loss, StageForward&& stage) {
  Group* pipeline = split_.pipeline && split_.pipeline->size() > 1 ? split_.pipeline : nullptr;
  const ModelSlice& slice = layout_.slice;
  if (pipeline && !slice.first_stage()) {
    StageMessage in = stage_input(0, B, T);
    pipeline->recv(in.data, in.count, in.type, slice.pp_rank - 1);
  }
  float loss = stage();
  if (!pipeline) return loss;
  if (!slice.last_stage()) {
    StageMessage out = stage_output(0, B, T);
    pipeline->send(out.data, out.count, out.type, slice.pp_rank + 1);
  }
  // The last stage's loss, on every stage (the others add zeros).
  return with_loss ? static_cast<float>(pipeline->all_reduce_sum(loss)) : 0.0f;
}

float Transformer::forward(UnitProvider& units, const int32_t* inputs, const int32_t* targets,
                           int B, int T) {
  return through_pipeline(B, T, targets != nullptr,
                          [&] { return stage_forward(units, 0, inputs, targets, B, T, 0.0f); });
}

void Transformer::decode(UnitProvider& units, const int32_t* inputs, int B, int T, int start) {
  through_pipeline(B, T, false, [&] {
    decode_stage(units, inputs, B, T, start);
    return 0.0f;
  });
}

}  // namespace llm
