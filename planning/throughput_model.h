// Predicted time of one training step of a config on `world` ranks of a
// given hardware profile, and its parts.
//  - Compute: each unit's forward and backward (plus recomputation) FLOPs
//    for one micro-batch at the rank's sustained matmul rate
//    (peak x sustained_fraction, shared by the node's ranks on a CPU); the
//    optimizer step from the bytes AdamW touches at memory bandwidth.
//  - Communication: the collectives the engine issues (recorded by
//    step_trace, re-sized for this config), each costed with NCCL's ring
//    alpha-beta model: base + (steps - inter_steps) a_intra + inter_steps
//    a_inter + bytes sent per rank / bus bandwidth, where steps are 2(n-1)
//    for all-reduce and n-1 for reduce-scatter / all-gather, inter_steps the
//    same over the nodes the group spans, and a group that spans nodes gets
//    its ranks' share of the node's NICs.
//  - Tensor parallelism (T > 1): each rank computes 1/T of every unit's
//    FLOPs, the data-parallel trace is that of D = world / T ranks moving
//    their slice, and the tensor group's collectives (tensor_parallel_model.h)
//    are waited for in line with the compute that issues them.
//  - Overlap: the trace is replayed on one compute timeline and one comm
//    channel per group: a collective starts when issued (or, without
//    asynchronous progress, when waited on) and its channel is free; compute
//    after a wait starts when the collective ends. So the model overlaps
//    exactly what the engine overlaps (one prefetched gather, reductions
//    in flight while the next units compute) and exposes the rest.
// Invariant: traffic per collective type equals what the engine's CommStats
// count for the same config and world (tested under mpirun).
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"
#include "planning/hardware_profile.h"
#include "planning/step_trace.h"

namespace llm {

// Traffic of one collective type per rank per step (scalar sums excluded, as
// CommStats excludes them): ring bytes sent, full logical payload, calls.
struct OpTraffic {
  uint64_t calls = 0, payload_bytes = 0, sent_bytes = 0;
  double busy_seconds = 0;  // sum of the modeled durations
};

struct StepPrediction {
  double step_seconds = 0;
  double compute_seconds = 0;    // forward + backward + recomputation
  double optimizer_seconds = 0;
  double comm_seconds = 0;       // sum of collective durations (overlapped or not)
  double exposed_comm_seconds = 0;  // step - compute - optimizer
  double tensor_comm_seconds = 0;   // the tensor group's collectives (all exposed)
  double model_flops = 0;        // step_flops of the global batch (no recomputation)
  double tflops_per_rank = 0;    // model_flops / world / step_seconds / 1e12
  int micro_batches = 0;
  OpTraffic traffic[3];          // indexed by CollectiveOp
};

struct ThroughputOptions {
  // 0: the engine's schedule. > 0 (ddp only): gradients all-reduced in
  // buckets of at least this many bytes, as PyTorch DDP does (25 MiB).
  size_t ddp_bucket_bytes = 0;
};

StepPrediction throughput_predict(const Config& config, int world, const HardwareProfile& hardware,
                                  const ThroughputOptions& options = {});

// Which ranks a group holds, in nodes of the profile: shard groups are blocks
// of consecutive ranks, replicate groups every S-th rank (topology.h).
struct GroupSpan {
  int size = 1, nodes = 1, ranks_per_node = 1;
};
GroupSpan group_span(GroupRole role, int world, int shard_group_size, int devices_per_node);

// Seconds of one ring collective whose full logical buffer is payload_bytes.
double collective_seconds(CollectiveOp op, const GroupSpan& span, double payload_bytes,
                          const HardwareProfile& hardware);

// FLOPs of `unit` in `pass` for one micro-batch (backward includes the
// recomputation activation checkpointing adds).
double unit_pass_flops(const Config& config, int unit, Pass pass);

}  // namespace llm
