// One stage's activation memory (see stage_buffers.h).
#include "model/stage_buffers.h"

#include "model/block.h"

namespace llm {

template <class A>
StagePieces<A>::StagePieces(const Backend& backend, const ModelConfig& config,
                            const ParameterLayout& layout, const RankShape& shape, Group* tensor,
                            bool fp8)
    : linear(backend, config, layout, fp8), sites(backend, config, shape, layout, tensor, linear) {
  for (const PlacedPart& placed : block_parts(config)) {
    if constexpr (std::is_same_v<A, Bf16>)
      parts.push_back(placed.part->make_bf16(placed.first_row));
    else
      parts.push_back(placed.part->make_f32(placed.first_row));
  }
}

template <class A>
BufferPlan plan_stage(const ModelConfig& c, int B, int T, ModelSlice slice, int in_flight,
                      int loss_rows, StagePieces<A>& pieces, BlockActivations& activations,
                      StageBuffers<A>& out, ActivationBytes& bytes) {
  const int tp = slice.tp_size;
  const RankShape s(c, B, T, tp);
  const LayerRange layers = pipeline_stage_layers(c.n_layers, slice.pp_size, slice.pp_rank);
  const size_t N = s.N, n = s.n, C = s.C;
  for (std::unique_ptr<BlockPart<A>>& part : pieces.parts) part->plan(activations, s);
  bytes.per_block_kept = activations.per_block_kept();
  bytes.per_block_recomputed = activations.per_block_recomputed();

  BufferPlan plan;
  size_t before = 0;
  auto role_bytes = [&]() {
    size_t now = plan.bytes(), added = now - before;
    before = now;
    return added;
  };
  plan.append(activations.blocks());
  role_bytes();
  plan.append(activations.scratch());
  bytes.recompute_scratch = role_bytes();

  out.slots.assign(in_flight, SlotBuffers<A>{});
  for (SlotBuffers<A>& slot : out.slots) plan.add(slot.residual, (layers.count() + 1) * n * C);
  bytes.residual_stream = role_bytes();
  for (SlotBuffers<A>& slot : out.slots) {
    if (slice.first_stage()) plan.add(slot.tokens.inputs, N);
    if (!slice.last_stage()) continue;
    plan.add(slot.tokens.targets, N);
    plan.add(slot.xf, N * C);
    plan.add(slot.rstd_f, n);
  }
  SharedBuffers<A>& h = out.shared;
  if (slice.last_stage()) {
    plan.add(h.logits, static_cast<size_t>(loss_rows) * s.V);
    plan.add(h.ce_parts, tp * static_cast<size_t>(loss_rows) * 2);
    plan.add(h.losses, N);
  }
  plan.add(h.rope_cos, T * s.D / 2);
  plan.add(h.rope_sin, T * s.D / 2);
  BufferPlan backward;
  pieces.sites.plan(plan, backward, N);
  if (tp > 1 || slice.pp_size > 1) plan.add(h.gathered_row, tp * s.V);
  bytes.head_and_loss = role_bytes();
  plan.append(backward);
  plan.append(activations.backward());
  bytes.backward_scratch = role_bytes();
  pieces.linear.plan(plan, N, in_flight);
  bytes.fp8_copies = role_bytes();
  bytes.total = plan.bytes();
  return plan;
}

#define LLM_STAGE_BUFFERS(A)                                                              \
  template struct StagePieces<A>;                                                         \
  template BufferPlan plan_stage<A>(const ModelConfig&, int, int, ModelSlice, int, int,   \
                                    StagePieces<A>&, BlockActivations&, StageBuffers<A>&, \
                                    ActivationBytes&);
LLM_STAGE_BUFFERS(float)
LLM_STAGE_BUFFERS(Bf16)
#undef LLM_STAGE_BUFFERS

}  // namespace llm
