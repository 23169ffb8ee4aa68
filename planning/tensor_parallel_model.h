// The collectives tensor parallelism (with sequence parallelism) adds to a
// training step, per rank of a tensor group of T, as model/transformer.cpp
// issues them for one micro-batch of N tokens (n = N / T rows per rank,
// activations of the precision's width):
//  - embedding: forward reduce-scatters the vocabulary-parallel lookup (n x C);
//    backward all-gathers the residual gradient (n x C);
//  - block forward: per norm an all-gather of its output and per
//    row-parallel projection (wo, w2) a reduce-scatter of the partial sums;
//    backward: per branch an all-gather of the residual gradient and a
//    reduce-scatter of the column-parallel input gradient, one fp32
//    all-reduce of the two norm gains' gradients (2C), plus the recomputed
//    forward's collectives (full: 2 gathers + the wo reduce-scatter;
//    selective: the 2 norm gathers);
//  - head forward: the final norm's all-gather and one of every rank's
//    (log-sum-exp, target logit) per token (2N fp32); backward: the
//    reduce-scatter of the LM head's input gradient and the norm gain's
//    all-reduce (C).
// Invariant: the step's traffic equals what the tensor group's CommStats
// count for the same config (tested under mpirun).
#pragma once

#include <cstddef>
#include <vector>

#include "config/config.h"
#include "model/unit_provider.h"
#include "planning/step_trace.h"
#include "planning/throughput_model.h"

namespace llm {

// One collective on the tensor group: `count` elements of element_bytes
// (one member's chunk for all-gather / reduce-scatter, the buffer for
// all-reduce).
struct TensorCollective {
  CollectiveOp op;
  size_t count;
  size_t element_bytes;
};

// What `unit` (0 = embedding, 1..L blocks, L + 1 head) issues in `pass` for
// one micro-batch; empty when parallel.tensor_parallel = 1.
std::vector<TensorCollective> tensor_parallel_collectives(const Config& config, int unit,
                                                          Pass pass);

// The tensor group's traffic over one step of `micro_batches` micro-batches,
// indexed by CollectiveOp, counted as CommStats counts it.
void tensor_parallel_step_traffic(const Config& config, int micro_batches, OpTraffic traffic[3]);

}  // namespace llm
