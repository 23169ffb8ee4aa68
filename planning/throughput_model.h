// Predicted time of one training step of a config on `world` ranks of a
// given hardware profile, and its parts.
//  - Compute: each unit's forward and backward (plus recomputation) FLOPs
//    for one micro-batch at the rank's sustained matmul rate
//    (peak x sustained_fraction, shared by the node's ranks on a CPU); the
//    optimizer step from the bytes AdamW touches at memory bandwidth.
//  - Communication: the collectives the engine issues (recorded by
//    step_trace, re-sized for this config), each costed as the profile's
//    library runs it (collective_model.h: NCCL's own choice of ring or tree
//    and LL, LL128 or Simple, with its latencies and bandwidths; or an MPI
//    ring), a group that spans nodes getting its ranks' share of the node's
//    NICs.
//  - Tensor parallelism (T > 1): each rank computes 1/T of every unit's
//    FLOPs, the data-parallel trace is that of D = world / T ranks moving
//    their slice, and the tensor group's collectives (tensor_parallel_model.h)
//    are waited for in line with the compute that issues them.
//  - Pipeline parallelism (P > 1): the prediction is for the stage with the
//    most compute (its units' forward + backward FLOPs: its blocks plus the
//    embedding or the head; the first such stage on a tie), which the others
//    wait for. Its trace is the data-parallel engine's over D = world /
//    (T P) ranks for that stage's units, in the config's schedule. The
//    step adds to its M micro-batches' slots the P - 1 slots the pipeline
//    idles while it fills and drains (the bubble: pipeline_bubble_fraction
//    of the M + P - 1 slots), a slot being the stage's forward + backward of
//    one micro-batch with its tensor collectives; and every slot waits in
//    line for two messages between stages (an activation and a gradient,
//    pipeline_message_bytes each, an exchange's two directions at once),
//    each costing the base latency, one link latency and bytes / bandwidth
//    of the link: stages are T x D ranks apart, and when the pipeline group
//    spans nodes every message is costed on the inter-node link (a rank's
//    share of its node's NICs), the pipeline running at the pace of its
//    slowest boundary.
//  - Overlap: the trace is replayed on one compute timeline and one comm
//    channel per group (a process group's collectives share one stream):
//    a collective starts when issued (or, without asynchronous progress,
//    when waited on) and its channel is free; compute after a wait starts
//    when the collective ends. So the model overlaps exactly what the engine
//    overlaps (one prefetched gather, reductions in flight while the next
//    units compute) and exposes the rest.
//  - Contention (contention.h): while collectives are in flight beside
//    compute, their blocks hold SMs and the compute runs on the rest, so
//    overlap is not free: contention_seconds is what it adds to compute.
//    The optimizer step (memory-bound) is not slowed.
//  Parts: step = compute + contention + optimizer + exposed communication
//  (+ the pipeline bubble).
// Invariant: traffic per collective type equals what the engine's CommStats
// (shard and replicate groups) count for the same config and world on a rank
// of the predicted stage (tested under mpirun).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "planning/collective_model.h"
#include "planning/hardware_profile.h"
#include "planning/pipeline_model.h"
#include "planning/step_trace.h"

namespace llm {

// Traffic of one collective type per rank per step (scalar sums excluded, as
// CommStats excludes them): ring bytes sent, full logical payload, calls.
struct OpTraffic {
  uint64_t calls = 0, payload_bytes = 0, sent_bytes = 0;
  double busy_seconds = 0;  // sum of the modeled durations
};

// When a unit's reduced gradient became final, from the step's start.
struct GradientFinal {
  int unit;
  double seconds;
};

struct StepPrediction {
  double step_seconds = 0;
  double compute_seconds = 0;  // forward + backward + recomputation
  double optimizer_seconds = 0;
  double comm_seconds = 0;            // sum of collective durations (overlapped or not)
  double contention_seconds = 0;      // compute slowed by collectives beside it (contention.h)
  double exposed_comm_seconds = 0;    // step - compute - contention - optimizer - pipeline bubble
  double comm_in_flight_seconds = 0;  // time any data-parallel collective runs (union)
  double overlapped_compute_seconds = 0;  // compute time with a collective beside it
  double tensor_comm_seconds = 0;         // the tensor group's collectives (all exposed)
  double model_flops = 0;                 // step_flops of the global batch (no recomputation)
  double tflops_per_rank = 0;             // model_flops / world / step_seconds / 1e12
  int micro_batches = 0;                  // M, per data-parallel rank and step
  OpTraffic traffic[3];                   // indexed by CollectiveOp; the predicted stage's
  std::string
      algorithm[3];  // per CollectiveOp: the library's choice for its largest call ("ring/LL128")
  // Pipeline parallelism (zero with P = 1).
  int pipeline_stage = 0;               // the stage predicted for (most compute)
  double pipeline_bubble_fraction = 0;  // (P - 1) / (M + P - 1)
  double pipeline_bubble_seconds = 0;   // P - 1 idle slots of the stage's forward + backward
  double pipeline_comm_seconds = 0;     // the stage's messages, waited for in line
  PipelineTraffic pipeline_traffic;     // one pipeline group's messages (pipeline_model.h)
  // The stage's units in the order the engine announced their gradients
  // final (the trace's gradient_final events), on the compute timeline.
  std::vector<GradientFinal> gradient_final;
};

struct ThroughputOptions {
  // 0: the engine's schedule. > 0 (ddp only): gradients all-reduced in
  // buckets of at least this many bytes, as PyTorch DDP does (25 MiB).
  size_t ddp_bucket_bytes = 0;
};

StepPrediction throughput_predict(const Config& config, int world, const HardwareProfile& hardware,
                                  const ThroughputOptions& options = {});

// The pipeline stage with the most forward + backward FLOPs per micro-batch
// (the first on a tie); 0 with one stage.
int pipeline_compute_stage(const Config& config);

}  // namespace llm
