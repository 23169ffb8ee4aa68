// One optimizer step's micro-batches through this rank's pipeline stage, in
// the order of a schedule: GPipe (every forward, then every backward; the
// simple reference) or 1F1B (after a warm-up of P - 1 - stage forwards, one
// forward then one backward, then the remaining backwards), moving the
// residual stream forward and its gradient backward between neighbouring
// stages over the model's pipeline group. With one stage both are plain
// gradient accumulation: forward and backward of each micro-batch in turn.
// Invariants: every stage runs the backward passes in micro-batch order, so
// gradients accumulate in the single-process order and both schedules give
// the same bits; a stage holds at most pipeline_in_flight() micro-batches'
// activations; messages between two stages in opposite directions travel as
// one send_recv (no deadlock on NCCL, nor with MPI's rendezvous sends).
#pragma once

#include <cstdint>
#include <functional>

#include "schema/config.h"
#include "model/transformer.h"
#include "model/unit_provider.h"

namespace llm {

// Micro-batches whose activations stage `stage` of `stages` holds at once
// under `schedule`, with `micro_batches` per step: 1F1B min(stages - stage,
// micro_batches), GPipe all of them.
int pipeline_in_flight(PipelineSchedule schedule, int stages, int stage, int micro_batches);

// The fraction of a step each stage idles while the pipeline fills and
// drains, (P - 1) / (M + P - 1), for stages of equal cost (both schedules).
double pipeline_bubble_fraction(int stages, int micro_batches);

// The tokens of one micro-batch, (B, T) each; valid until the next call.
struct MicroBatchTokens {
  const int32_t* inputs;
  const int32_t* targets;
};

struct PipelineStepResult {
  double loss_sum = 0;      // the micro-batches' mean losses summed (last stage; 0 elsewhere)
  double wait_seconds = 0;  // spent waiting for the neighbouring stages' messages
};

// Runs `micro_batches` micro-batches of (B, T) tokens through `model`'s stage:
// tokens(i) gives micro-batch i, before_backward(i) runs right before its
// backward pass (the sharding engine learns which is the step's last), and
// every gradient is scaled by dloss as in Transformer::stage_forward.
PipelineStepResult pipeline_step(PipelineSchedule schedule, Transformer& model, UnitProvider& units,
                                 int micro_batches, int B, int T, float dloss,
                                 const std::function<MicroBatchTokens(int)>& tokens,
                                 const std::function<void(int)>& before_backward);

}  // namespace llm
