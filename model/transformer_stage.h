// One rank's stage of the transformer (transformer.h), for activations of
// storage type A: the pieces that own its activation memory (stage_buffers.h),
// the head, the token uploads, the key/value cache and the device-graph
// segments. Its methods are split by job: the forward and backward walks in
// transformer.cpp, incremental decoding and sampling's logits in
// decoding.cpp; each file instantiates its members for fp32 and bf16.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "model/captured_segments.h"
#include "model/lm_head.h"
#include "model/stage_buffers.h"
#include "model/transformer.h"
#include "base/error.h"

namespace llm {

template <class A>
class TransformerStage final : public Transformer {
 public:
  TransformerStage(const ModelConfig& config, int max_batch, int max_seq, const Backend& backend,
                   RecomputePlan recompute, Precision precision, ModelSplit split, int loss_chunk)
      : Transformer(config, precision, split),
        backend_(backend),
        ops_(backend.ops<A>()),
        memory_(*backend.memory),
        pipeline_(split.pipeline),
        max_batch_(max_batch),
        max_seq_(max_seq),
        tp_(layout_.slice.tp_size),
        s_(config, 1, 1, tp_),
        layers_(layout_.layers),
        first_(layout_.slice.first_stage()),
        last_(layout_.slice.last_stage()),
        recompute_(recompute),
        loss_rows_(loss_chunk_rows(config, max_batch * max_seq, tp_, sizeof(A), loss_chunk)),
        pieces_(backend, config_, layout_, s_, split.tensor, precision == Precision::fp8),
        activations_(split.in_flight, layers_, recompute),
        head_(backend, s_, pieces_.sites, pieces_.linear, buf_.shared, loss_rows_),
        uploads_(memory_, max_batch, max_seq) {
    const int tp_rank = layout_.slice.tp_rank;
    LLM_CHECK(tp_ == 1 ||
                  (split.tensor && split.tensor->size() == tp_ && split.tensor->rank() == tp_rank),
              "transformer: the layout's tensor slice {} of {} is not the tensor group's rank",
              tp_rank, tp_);
    LLM_CHECK(max_seq % tp_ == 0,
              "transformer: max_seq {} is not a multiple of the tensor-parallel size {}", max_seq,
              tp_);
    BufferPlan plan = plan_stage(config_, max_batch, max_seq, layout_.slice, split.in_flight,
                                 loss_rows_, pieces_, activations_, buf_, bytes_);
    arena_ = Arena("activations", plan.bytes(), memory_);
    plan.bind(arena_);
    activations_.redirect();  // recomputed blocks work in the shared scratch
    pieces_.sites.bound();
    host_losses_.resize(static_cast<size_t>(max_batch) * max_seq);
    host_row_.resize(tp_ * s_.V);
    slot_ = &buf_.slots[0];
    flows_.resize(pieces_.parts.size());
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
    const TensorParallelSites<A>& sites = pieces_.sites;
    return {sites.own_rows(sites.dres_full(), B * T), static_cast<size_t>(B * T / tp_) * s_.C,
            sites.wire_type()};
  }
  void reserve_kv_cache(int batch, int capacity) override;
  int kv_cache_capacity() const override { return kv_capacity_; }
  void decode_stage(UnitProvider& units, const int32_t* inputs, int B, int T, int start) override;
  void logits_row(UnitProvider& units, int row, float* out) override;
  void set_document_masking(DocumentBoundary boundary, bool reset_positions) override {
    std::vector<SlotTokens*> slots;
    for (SlotBuffers<A>& slot : buf_.slots) slots.push_back(&slot.tokens);
    uploads_.set_document_masking(boundary, reset_positions, slots);
  }
  void set_device_graphs(bool on) override {
    LLM_CHECK(!on || tp_ == 1,
              "training.cuda_graphs: tensor parallelism's collectives run inside every block, "
              "where a device graph cannot hold them; turn one of the two off");
    segments_.enable(on);
  }
  int device_graphs() const override { return segments_.graphs(); }
  void set_fp8_forward_accumulation(Fp8Accumulation accumulation) override {
    pieces_.linear.set_forward_accumulation(accumulation);
  }
  void set_fp8_fused_amax(bool on) override { pieces_.linear.set_fused_amax(on); }
  int fp8_delayed_inputs() const override {
    return config_.n_layers * pieces_.linear.matrices_per_block();
  }
  void begin_fp8_delayed_step(const std::vector<float>& amax) override {
    LLM_CHECK(amax.empty() || static_cast<int>(amax.size()) == fp8_delayed_inputs(),
              "transformer: {} FP8 input amaxes for {} inputs", amax.size(), fp8_delayed_inputs());
    // The first step with scales runs other kernels than the one before (no
    // amax pass; the producers write the codes): its graphs are dropped.
    if (!amax.empty() && !pieces_.linear.has_delayed_scales()) segments_.drop_graphs();
    pieces_.linear.begin_delayed_step(amax.empty() ? nullptr : amax.data() + first_fp8_input());
  }
  std::vector<float> fp8_step_amax() const override {
    std::vector<float> amax(static_cast<size_t>(fp8_delayed_inputs()), 0.0f);
    pieces_.linear.read_step_amax(amax.data() + first_fp8_input());
    return amax;
  }

 private:
  // Residual-stream entry `index` of a slot: this rank's rows.
  StageMessage stage_rows(A* residual, int B, int T, int index = 0) const {
    const size_t rows = static_cast<size_t>(B * T / tp_) * s_.C;
    return {residual + static_cast<size_t>(index) * residual_stride(), rows,
            TensorParallelSites<A>::wire_type()};
  }
  // The first of this stage's FP8 forward inputs among the whole model's.
  int first_fp8_input() const { return layers_.begin * pieces_.linear.matrices_per_block(); }
  size_t residual_stride() const {
    return static_cast<size_t>(max_batch_) * (max_seq_ / tp_) * s_.C;
  }
  // The current slot's input of block l (l = layers_.end: the stage's output).
  A* residual(int l) const {
    return slot_->residual + static_cast<size_t>(l - layers_.begin) * residual_stride();
  }
  const A* params(UnitProvider& units, int unit, Pass pass) {
    return static_cast<const A*>(units.acquire_params(unit, pass));
  }
  const A* head_weight(UnitProvider& units, const A* head_params, Pass pass) {
    if (config_.tie_embeddings) return params(units, layout_.embed_unit(), pass);
    return head_params + config_.dim;
  }
  void release_head_weight(UnitProvider& units, Pass pass) {
    if (config_.tie_embeddings) units.release_params(layout_.embed_unit(), pass);
  }
  // Checks the micro-batch's shape and queues its tokens into the current slot.
  void upload_micro_batch(const int32_t* inputs, const int32_t* targets, int B, int T);
  // This stage's forward pass: from the uploaded tokens (first stage) or the
  // received activation, to the stage's output or (last stage) the final
  // norm's output, and with `loss` the losses (evaluation: no gradient).
  void forward_blocks(UnitProvider& units, int B, int T, bool loss);
  // The last stage's backward: the head's logits, the losses and their
  // gradient chunk by chunk, through the LM head and final norm, into dres.
  void head_backward(UnitProvider& units, int B, int T);
  // The first stage's backward of the embedding, from dres.
  void embedding_backward(UnitProvider& units, int B, int T);

  // --- a block: its parts walked -------------------------------------------
  BlockContext<A> context(int l, const A* p, float* gr, int B, int T);
  // Block l's forward into its buffers; with write_output false it stops
  // before its last projection (what backward recomputation needs).
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

  // Mean of the per-token losses (an ignored target's is 0), summed on the
  // host in token order.
  float mean_loss(int N);

  const Backend& backend_;
  const TypedOps<A>& ops_;  // the backend's table for storage type A
  const DeviceMemory& memory_;
  Group* pipeline_;  // the pipeline group (null: one stage)
  int max_batch_, max_seq_;
  int tp_;
  RankShape s_;        // per-token sizes (N, n unused)
  LayerRange layers_;  // this stage's blocks
  bool first_, last_;  // the first / last pipeline stage
  RecomputePlan recompute_;
  int loss_rows_;  // rows of the LM head's logits at a time (shared.logits)
  StagePieces<A> pieces_;
  BlockActivations activations_;
  StageBuffers<A> buf_;
  LmHead<A> head_;
  TokenUploads uploads_;
  SlotBuffers<A>* slot_;             // the slot of the micro-batch being computed
  std::vector<BlockFlow<A>> flows_;  // a block's backward: each part's forward input
  Arena arena_;
  std::vector<float> host_losses_;   // (max_batch * max_seq)
  mutable std::vector<A> host_row_;  // (V) one row of logits read back for sampling
  // Incremental decoding: per block of the stage, its key/value cache
  // (kv_batch_, kv_capacity_, 2 * KV * D), in kv_arena_; decode_start_ is the
  // position of the first token of the forward being decoded (-1: not decoding).
  Arena kv_arena_;
  std::vector<A*> kv_cache_;
  int kv_batch_ = 0, kv_capacity_ = 0;
  int decode_start_ = -1;
  CapturedSegments segments_{backend_.graphs};
};

}  // namespace llm
