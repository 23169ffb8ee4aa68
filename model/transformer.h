// The Llama-family decoder written as if for one device: embedding, L blocks
// of (RMSNorm, fused qkv, RoPE, causal GQA attention, output projection,
// residual, RMSNorm, fused gate/up, SwiGLU, down projection, residual), final
// RMSNorm, LM head (optionally tied), cross-entropy.
// It owns only activations; parameters and gradients come unit by unit from a
// UnitProvider, which is how sharding engines plug in.
// Activation recomputation: a recomputed block keeps only what its mode
// says (full: its input, which is the residual stream; selective: the matmul
// and attention outputs) and recomputes the rest in backward from the unit
// acquired for backward, with the same kernels in the same order, so
// gradients are bit-identical to a run without recomputation.
// Tensor parallelism (a tensor group of T > 1 ranks; layout.h's slices):
// each rank computes its heads, ffn columns and vocabulary rows for all N
// tokens of a micro-batch, while the residual stream, the norms and their
// inputs hold only this rank's N / T rows (sequence parallelism, as in
// Megatron-LM): a norm's output is all-gathered before a column-parallel
// matmul, a row-parallel matmul's partial sums are reduce-scattered back to
// rows; the embedding is vocabulary-parallel (reduce-scattered), and the
// cross-entropy combines per-rank (log-sum-exp, target logit) pairs, so no
// rank holds full logits. Norm-gain gradients are summed over the group per
// micro-batch. Every rank of a group runs the same micro-batch.
// Pipeline parallelism (a pipeline group of P > 1 ranks; the layout's stage):
// a rank runs its stage's blocks, stage_forward / stage_backward one
// micro-batch at a time, holding the activations of up to `in_flight` of them
// in slots; the schedule (parallel/pipeline_schedule.h) moves the activations and
// gradients between stages through stage_input / stage_output /
// stage_gradient. forward() (evaluation, generation) runs one micro-batch
// through the whole pipeline itself.
// Invariant: every activation buffer is allocated once, at construction, for
// micro-batches up to (max_batch, max_seq); no allocation happens per step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/arena.h"
#include "data/document_boundary.h"
#include "schema/config.h"
#include "model/backend.h"
#include "model/block_activations.h"
#include "model/layout.h"
#include "model/unit_provider.h"
#include "collectives/group.h"

namespace llm {

// The rows of the LM head whose logits exist at once, for micro-batches of N
// tokens, vocabulary slices of vocab_size / tp and logits of value_bytes:
// `requested` (training.loss_chunk_tokens) when > 0, else as many as take
// kAutoLossChunkBytes (config.h; whole multiples of 64 rows from 64 on); at
// most N.
int loss_chunk_rows(const ModelConfig& config, int N, int tp, size_t value_bytes, int requested);

// How a rank's model is split; null groups split nothing.
struct ModelSplit {
  Group* tensor = nullptr;    // its members split every layer (max_seq a multiple of its size)
  Group* pipeline = nullptr;  // member p runs pipeline stage p
  int in_flight = 1;          // micro-batches whose activations a stage holds at once
};

// A message between pipeline stages: `count` elements of `type` at `data`.
struct StageMessage {
  void* data;
  size_t count;
  WireType type;
};

// The model's interface; create() returns the implementation for the
// precision's activation type (transformer.cpp: fp32, or bf16 for bf16 and
// fp8). forward() and decode() run the whole pipeline through the stage
// methods.
class Transformer {
 public:
  static std::unique_ptr<Transformer> create(const ModelConfig& config, int max_batch, int max_seq,
                                             const Backend& backend, RecomputePlan recompute = {},
                                             Precision precision = Precision::fp32,
                                             ModelSplit split = {}, int loss_chunk_tokens = 0);
  virtual ~Transformer() = default;
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  // Per rank, for the rank's slice and `in_flight` micro-batches held at once.
  static ActivationBytes activation_bytes(const ModelConfig& config, int B, int T,
                                          RecomputePlan recompute = {},
                                          Precision precision = Precision::fp32,
                                          ModelSlice slice = {}, int in_flight = 1,
                                          int loss_chunk_tokens = 0);
  // Sequence lengths must be multiples of this (the tensor-parallel size).
  int sequence_multiple() const { return layout_.slice.tp_size; }

  const ModelConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  const ModelSplit& split() const { return split_; }
  Precision precision() const { return precision_; }
  const ActivationBytes& activation_bytes() const { return bytes_; }

  // Token arrays (inputs, targets) are host memory; everything else lives on
  // the backend's device.
  // Forward of B sequences of T tokens (inputs (B, T)) through every stage.
  // Returns the cross-entropy against targets (B, T) summed over the kept
  // targets (kIgnoredTarget ones count 0) and divided by B * T, on every
  // rank: the mean when every target is kept. With
  // targets == nullptr returns 0 and leaves the final norm's output, from
  // which logits_row() forms any row's logits.
  float forward(UnitProvider& units, const int32_t* inputs, const int32_t* targets, int B, int T);
  // Document masking: from now on, documents start where `boundary` (the
  // tokenizer's) says: at BOS, or after EOS; attention never crosses into
  // an earlier one (a sequence's first tokens are a document too), and with
  // reset_positions RoPE positions restart at each start. Every stage then
  // needs the inputs. Decoding (one sequence) is unmasked. Once, before use.
  virtual void set_document_masking(DocumentBoundary boundary, bool reset_positions) = 0;
  // training.cuda_graphs: from now on each stretch of device work between
  // two unit boundaries runs eagerly the first time its shape and buffers
  // are seen, is captured as a device graph the second time and replayed
  // after (model/captured_segments.h), in training and evaluation alike;
  // decoding stays eager. Refused on a backend without graphs (the CPU) and
  // with tensor parallelism (its collectives run inside the blocks).
  virtual void set_device_graphs(bool on) = 0;
  // precision fp8 (training.fp8_fast_accum): how the forward's FP8 GEMMs sum
  // (model/kernels/fp8_matmul.h); the backward's are always promoted.
  // Ignored in the other precisions.
  virtual void set_fp8_forward_accumulation(Fp8Accumulation accumulation) = 0;
  // precision fp8: whether RMSNorm and SwiGLU write their rows' amaxes for the
  // matmul that reads their output (on, the default), or each FP8 input's
  // scale comes from an amax pass over it (the same bits, one more read).
  virtual void set_fp8_fused_amax(bool on) = 0;
  // precision fp8 with training.fp8_scaling = delayed (linear_layers.h): the
  // block matmuls' FP8 forward inputs of the whole model, each matrix's of
  // each block in block order (global block x matrices per block + matrix).
  virtual int fp8_delayed_inputs() const = 0;
  // From now on (an optimizer step) each input's scale comes from amax[input]
  // (fp8_delayed_inputs() values, the amax history's maxima; empty: each
  // input's own, the history being empty), and every running amax restarts
  // at 0. Waits for the device's queued work.
  virtual void begin_fp8_delayed_step(const std::vector<float>& amax) = 0;
  // The inputs' running amaxes since begin_fp8_delayed_step: this stage's
  // blocks', 0 for the others' (fp8_delayed_inputs() values).
  virtual std::vector<float> fp8_step_amax() const = 0;
  // Graphs captured so far.
  virtual int device_graphs() const = 0;
  // The V logits of row `row` (= b * T + t) of the last forward or decode, as
  // fp32 on every rank (a collective over the tensor and pipeline groups):
  // formed from the row's final-norm output with the head's weight, acquired
  // from `units` for the row.
  virtual void logits_row(UnitProvider& units, int row, float* out) = 0;

  // --- incremental decoding (generation) -------------------------------------
  // Allocates, once, every block's key/value cache for up to `batch`
  // sequences of `capacity` positions (at most the construction's max_batch
  // and max_seq); a no-op when one at least that large is there, refused
  // when a smaller one is.
  virtual void reserve_kv_cache(int batch, int capacity) = 0;
  // Positions per sequence of the reserved cache (0: none).
  virtual int kv_cache_capacity() const = 0;
  // The forward of the next T tokens of B sequences (inputs (B, T), T a
  // multiple of sequence_multiple()) at positions start .. start + T - 1:
  // their keys and values go into the cache at those positions and each
  // attends to the cached positions up to its own, so the logits (readable
  // through logits_row) equal forward()'s rows for the whole sequence. A
  // decode at `start` overwrites the cache from there on: start = 0 begins
  // new sequences.
  void decode(UnitProvider& units, const int32_t* inputs, int B, int T, int start);

  // --- one pipeline stage (with P = 1 the stage is the whole model) ---------
  // This stage's forward of a micro-batch into activation slot `slot` (<
  // in_flight): from the embedding (first stage) or the activation received
  // into stage_input(slot), through its blocks, to stage_output(slot) or (last
  // stage) the final norm. With dloss == 0 (evaluation) the last stage then
  // forms the loss and returns it as forward() does. With dloss != 0
  // (training) it returns 0: the loss comes with the head's backward, so
  // that stage_backward gives each unit's gradient (+=) d(dloss * sum of
  // per-token losses)/d(params): dloss = 1/(tokens of the global batch)
  // makes a sum over micro-batches and ranks the mean gradient (1/(kept
  // targets of the global batch) with loss masks: an ignored target adds
  // nothing). Returns 0 on the other stages. `inputs` are read on the first
  // stage, `targets` on the last.
  virtual float stage_forward(UnitProvider& units, int slot, const int32_t* inputs,
                              const int32_t* targets, int B, int T, float dloss) = 0;
  // The backward of the micro-batch in `slot`: on the last stage from the
  // loss (the logits, the losses and their gradient a chunk of rows at a
  // time), else from the gradient received into stage_gradient(),
  // accumulating its units' gradients, down to the embedding (first stage)
  // or into stage_gradient() for the previous stage. Returns the last
  // stage's loss of a training forward (dloss != 0) as forward() gives it,
  // else 0.
  virtual float stage_backward(UnitProvider& units, int slot, int B, int T) = 0;
  // Where the previous stage's activation for `slot` is received, what goes
  // to the next stage, and the gradient of either (this rank's rows of the
  // residual stream: B * T / tp rows of dim).
  virtual StageMessage stage_input(int slot, int B, int T) const = 0;
  virtual StageMessage stage_output(int slot, int B, int T) const = 0;
  virtual StageMessage stage_gradient(int B, int T) const = 0;

 protected:
  // The layout of `split`'s slice; the implementation plans bytes_.
  Transformer(const ModelConfig& config, Precision precision, ModelSplit split);
  // This stage's part of decode(): its blocks' forward of the new tokens.
  virtual void decode_stage(UnitProvider& units, const int32_t* inputs, int B, int T,
                            int start) = 0;

  ModelConfig config_;
  ParameterLayout layout_;
  Precision precision_;
  ModelSplit split_;
  ActivationBytes bytes_;

 private:
  // Runs `stage` (this stage's forward of slot 0) between receiving its input
  // from the previous stage and sending its output to the next; returns the
  // last stage's loss on every stage when `with_loss`, else 0.
  template <class StageForward>
  float through_pipeline(int B, int T, bool with_loss, StageForward&& stage);
};

}  // namespace llm
