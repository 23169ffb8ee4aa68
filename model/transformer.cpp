// The stage driver: forward and backward of the decoder over its units. It
// asks the UnitProvider for parameters and gradient buffers at unit
// boundaries, walks each block's parts (block_part.h) forward and back,
// recomputes what the recomputation plan dropped, and runs the embedding and
// the head (lm_head.h); all math is in the backend's kernels, called by the
// parts, the linear layers (linear_layers.h) and the tensor-parallel sites
// (tensor_parallel_sites.h).
// Invariant: a micro-batch queues its work from the upload of its tokens to
// the read-back of its losses without waiting for the device in between
// (parameter and gradient collectives aside, which the UnitProvider orders).
#include "model/transformer.h"

#include <type_traits>

#include "model/transformer_stage.h"

namespace llm {

template <class A>
BlockContext<A> TransformerStage<A>::context(int l, const A* p, float* gr, int B, int T) {
  BlockContext<A> ctx{config_, ops_, s_, pieces_.linear, pieces_.sites, layout_.block.offsets};
  ctx.slot = static_cast<int>(slot_ - buf_.slots.data());
  ctx.block = l - layers_.begin;
  ctx.B = B;
  ctx.T = T;
  ctx.params = p;
  ctx.grads = gr;
  ctx.doc_start = slot_->tokens.doc_start;
  ctx.positions = slot_->tokens.positions;
  ctx.rope_cos = buf_.shared.rope_cos;
  ctx.rope_sin = buf_.shared.rope_sin;
  if (decode_start_ >= 0) {
    ctx.decode_start = decode_start_;
    ctx.kv_cache = kv_cache_[ctx.block];
    ctx.kv_capacity = kv_capacity_;
  }
  return ctx;
}

template <class A>
void TransformerStage<A>::block_forward(int l, const A* p, int B, int T, bool write_output) {
  const BlockContext<A> ctx = context(l, p, nullptr, B, T);
  BlockFlow<A> flow{residual(l), nullptr, write_output ? residual(l + 1) : nullptr};
  for (const std::unique_ptr<BlockPart<A>>& part : pieces_.parts) {
    part->forward(ctx, flow);
    part->pass(ctx, flow);
  }
}

template <class A>
void TransformerStage<A>::recompute_block(int l, const A* p, int B, int T) {
  if (!recompute_.recomputes(l)) return;
  if (recompute_.mode == Recompute::full) {
    block_forward(l, p, B, T, /*write_output=*/false);
    return;
  }
  // Selective: the cheap outputs, from the kept expensive ones.
  const BlockContext<A> ctx = context(l, p, nullptr, B, T);
  BlockFlow<A> flow{residual(l), nullptr, nullptr};
  for (const std::unique_ptr<BlockPart<A>>& part : pieces_.parts) {
    part->recompute(ctx, flow);
    part->pass(ctx, flow);
  }
}

template <class A>
void TransformerStage<A>::block_backward(int l, const A* p, float* gr, int B, int T) {
  const BlockContext<A> ctx = context(l, p, gr, B, T);
  BlockFlow<A> flow{residual(l), nullptr, residual(l + 1)};
  for (size_t i = 0; i < pieces_.parts.size(); ++i) {
    flows_[i] = flow;
    pieces_.parts[i]->pass(ctx, flow);
  }
  const A* dout = nullptr;  // the residual stream's gradient is the sites' dres
  for (size_t i = pieces_.parts.size(); i-- > 0;)
    dout = pieces_.parts[i]->backward(ctx, flows_[i], dout);
  pieces_.sites.sum_block_gains(gr);
}

template <class A>
void TransformerStage<A>::upload_micro_batch(const int32_t* inputs, const int32_t* targets, int B,
                                             int T) {
  LLM_CHECK(B >= 1 && B <= max_batch_ && T >= 1 && T <= max_seq_,
            "micro-batch ({}, {}) exceeds the activation buffers ({}, {})", B, T, max_batch_,
            max_seq_);
  LLM_CHECK(T % tp_ == 0,
            "micro-batch sequence length {} is not a multiple of the tensor-parallel size {}", T,
            tp_);
  uploads_.upload(slot_->tokens, inputs, targets, B, T, first_, last_);
}

template <class A>
void TransformerStage<A>::forward_blocks(UnitProvider& units, int B, int T, bool loss) {
  const int N = B * T, C = static_cast<int>(s_.C), V = static_cast<int>(s_.V);
  TensorParallelSites<A>& sites = pieces_.sites;
  if (first_) {
    // Vocabulary-parallel embedding: each rank embeds the tokens of its
    // vocabulary rows (zeros elsewhere), reduce-scattered to token rows.
    const int embed_unit = layout_.embed_unit();
    const A* embed = params(units, embed_unit, Pass::forward);
    segment(forward_site(embed_unit), B, T, 0, {embed}, [&] {
      A* embedded = tp_ == 1 ? residual(layers_.begin) : sites.partial();
      ops_.embedding_forward(embedded, slot_->tokens.inputs, embed, N, C,
                             static_cast<int>(sites.rank() * s_.V), V);
      if (tp_ > 1) {
        sites.tensor(TensorPayload::activation_rows)
            .reduce_scatter(sites.partial(), residual(layers_.begin),
                            static_cast<size_t>(N / tp_) * C, sites.wire_type());
      }
    });
    units.release_params(embed_unit, Pass::forward);
  }

  for (int l = layers_.begin; l < layers_.end; ++l) {
    const int unit = layout_.block_unit(l);
    const A* p = params(units, unit, Pass::forward);
    // Outside the segments: a captured segment replays its kernels whatever the version.
    pieces_.linear.cast_block_weights(l - layers_.begin, p, units.params_version());
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
          [&] { head_.final_norm(*slot_, residual(layers_.end), hp, N); });
  if (loss) {
    const A* weight = head_weight(units, hp, Pass::forward);
    segment(loss_site(), B, T, 0, {hp, weight}, [&] { head_.losses(*slot_, weight, N); });
    release_head_weight(units, Pass::forward);
  }
  units.release_params(head, Pass::forward);
}

template <class A>
float TransformerStage<A>::stage_forward(UnitProvider& units, int slot, const int32_t* inputs,
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
float TransformerStage<A>::mean_loss(int N) {
  memory_.to_host(host_losses_.data(), buf_.shared.losses, static_cast<size_t>(N) * sizeof(float));
  uploads_.device_passed();  // to_host waited for the device
  double sum = 0;
  for (int i = 0; i < N; ++i) sum += host_losses_[i];
  return static_cast<float>(sum / N);
}

template <class A>
void TransformerStage<A>::head_backward(UnitProvider& units, int B, int T) {
  const int N = B * T, C = static_cast<int>(s_.C);
  // The final norm and LM head (its weight may be the tied embedding).
  const int head = layout_.head_unit();
  const A* hp = params(units, head, Pass::backward);
  float* hg = units.acquire_grads(head);
  float* head_weight_grad =
      config_.tie_embeddings ? units.acquire_grads(layout_.embed_unit()) : hg + C;
  const A* weight = head_weight(units, hp, Pass::backward);
  // The forward's dloss is in the segment's key: its loss kernels scale by it.
  segment(backward_site(head), B, T, slot_->dloss, {hp, hg, head_weight_grad, weight}, [&] {
    head_.backward(*slot_, residual(layers_.end), hp, hg, weight, head_weight_grad, N);
  });
  release_head_weight(units, Pass::backward);
  units.release_params(head, Pass::backward);
  units.release_grads(head);
}

template <class A>
float TransformerStage<A>::stage_backward(UnitProvider& units, int slot, int B, int T) {
  slot_ = &buf_.slots.at(slot);
  const int N = B * T;
  pieces_.sites.start_backward(N);  // the next stage's gradient arrived there (not last)
  if (last_) head_backward(units, B, T);

  for (int l = layers_.end - 1; l >= layers_.begin; --l) {
    const int unit = layout_.block_unit(l);
    const A* p = params(units, unit, Pass::backward);
    float* gr = units.acquire_grads(unit);
    // A no-op after this step's forward.
    pieces_.linear.cast_block_weights(l - layers_.begin, p, units.params_version());
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
void TransformerStage<A>::embedding_backward(UnitProvider& units, int B, int T) {
  const int N = B * T, C = static_cast<int>(s_.C), V = static_cast<int>(s_.V);
  TensorParallelSites<A>& sites = pieces_.sites;
  // Each rank's vocabulary rows take the gradient of every token row (the
  // gather inside the embedding's gradient window: it is the embedding's
  // backward, as the tensor-parallel recording sees it).
  float* eg = units.acquire_grads(layout_.embed_unit());
  segment(backward_site(layout_.embed_unit()), B, T, 0, {eg}, [&] {
    const A* dres_full = sites.gather_dres(N);
    ops_.embedding_backward(eg, dres_full, slot_->tokens.inputs, N, C,
                            static_cast<int>(sites.rank() * s_.V), V);
  });
  units.release_grads(layout_.embed_unit());
}

template class TransformerStage<float>;
template class TransformerStage<Bf16>;

namespace {

// The bytes of a stage's plan, without allocating.
template <class A>
ActivationBytes planned_bytes(const ModelConfig& config, int B, int T, RecomputePlan recompute,
                              Precision precision, ModelSlice slice, int in_flight,
                              int loss_chunk_tokens) {
  const ParameterLayout layout = layout_build(config, slice);
  const RankShape shape(config, 1, 1, slice.tp_size);
  StagePieces<A> pieces(backend_cpu(), config, layout, shape, nullptr, precision == Precision::fp8);
  BlockActivations activations(in_flight, layout.layers, recompute);
  StageBuffers<A> unbound;
  ActivationBytes bytes;
  const int loss_rows = loss_chunk_rows(config, B * T, slice.tp_size, sizeof(A), loss_chunk_tokens);
  plan_stage(config, B, T, slice, in_flight, loss_rows, pieces, activations, unbound, bytes);
  return bytes;
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
    return std::make_unique<TransformerStage<Bf16>>(config, max_batch, max_seq, backend, recompute,
                                                    precision, split, loss_chunk_tokens);
  return std::make_unique<TransformerStage<float>>(config, max_batch, max_seq, backend, recompute,
                                                   precision, split, loss_chunk_tokens);
}

ActivationBytes Transformer::activation_bytes(const ModelConfig& config, int B, int T,
                                              RecomputePlan recompute, Precision precision,
                                              ModelSlice slice, int in_flight,
                                              int loss_chunk_tokens) {
  if (stores_bf16(precision))
    return planned_bytes<Bf16>(config, B, T, recompute, precision, slice, in_flight,
                               loss_chunk_tokens);
  return planned_bytes<float>(config, B, T, recompute, precision, slice, in_flight,
                              loss_chunk_tokens);
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
