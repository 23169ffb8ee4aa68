// The collectives tensor parallelism (with sequence parallelism) adds to a
// training step, per rank of a tensor group of T, recorded from the model's
// own calls: the real Transformer runs one micro-batch forward and backward
// of a tiny stand-in (the config's layers, tying, recompute and
// precision; T heads of 4, an FFN and a vocabulary of T, T tokens) over a
// recording tensor group (cost_models/recording_group.h). Each collective is
// given to the unit whose pass issued it (the outermost unit held, else the
// one released last: the loss's gather after the head's forward) and re-sized
// for the real config by the tag the transformer gave it where it issued it
// (model/tensor_payload.h): n x C activation rows (n = N / T of a
// micro-batch's N tokens), the loss's 2N per-token pairs, or norm-gain
// gradients in multiples of C.
// Invariant: the step's traffic equals what the tensor group's CommStats
// count for the same config (tested under mpirun); a collective the model
// adds with a known tag shows here without a change to this file; one
// untagged, or whose stand-in count is not its tag's, fails the recording by
// name.
#pragma once

#include <cstddef>
#include <vector>

#include "schema/config.h"
#include "model/unit_provider.h"
#include "cost_models/step_trace.h"
#include "cost_models/throughput_model.h"

namespace llm {

// One collective on the tensor group: `count` elements of element_bytes
// (one member's chunk for all-gather / reduce-scatter, the buffer for
// all-reduce).
struct TensorCollective {
  CollectiveOp op;
  size_t count;
  size_t element_bytes;
};

// What each unit (0 = embedding, 1..L blocks, L + 1 head) issues in each pass
// for one micro-batch, at [2 * unit + (pass == Pass::backward)], in issue
// order; all empty when parallel.tensor_parallel = 1.
std::vector<std::vector<TensorCollective>> tensor_parallel_collectives(const Config& config);

// The tensor group's traffic over one step of `micro_batches` micro-batches,
// indexed by CollectiveOp, counted as CommStats counts it.
void tensor_parallel_step_traffic(const Config& config, int micro_batches, OpTraffic traffic[3]);

}  // namespace llm
