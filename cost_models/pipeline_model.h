// The messages pipeline parallelism adds to a training step, as
// parallel/pipeline_schedule.cpp sends them: each of the P - 1 boundaries
// between stages carries, per micro-batch, the residual stream forward and
// its gradient backward, one message each way per pipeline group (one per
// tensor-parallel and data-parallel position): B x T / tensor_parallel rows of
// dim elements of the precision's width. The schedule changes the order of
// the messages, never their number or size.
// Invariant: the step's traffic equals what the pipeline group's CommStats
// count for the same config (tested under mpirun).
#pragma once

#include <cstdint>

#include "schema/config.h"

namespace llm {

// Bytes of one activation (or gradient) message between stages.
uint64_t pipeline_message_bytes(const Config& config);

struct PipelineTraffic {
  uint64_t sends = 0;       // point-to-point messages
  uint64_t sent_bytes = 0;  // their bytes
};
// One pipeline group's traffic over a step of `micro_batches` micro-batches,
// summed over its P members (what their CommStats p2p_sent add up to).
PipelineTraffic pipeline_step_traffic(const Config& config, int micro_batches);

}  // namespace llm
