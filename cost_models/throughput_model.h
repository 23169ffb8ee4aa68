// Predicted time of one training step of a config on `world` ranks of a
// given hardware profile, and its parts: compute (model/flops.h at the
// rank's sustained rate, 1/T of it under tensor parallelism, the stage with
// the most compute under pipeline parallelism, plus its bubble and stage
// messages; at the slowest of the world's ranks' pace where the profile
// gives their rates a spread, slowest_rank.h), the optimizer (bytes at
// memory bandwidth), the collectives the engine issues (recorded by
// step_trace.h, costed by collective_model.h as the profile's library runs
// them) and those of the tensor group (tensor_parallel_model.h, waited for
// in line), replayed on one compute timeline and one channel per group, so
// the model overlaps exactly what the engine overlaps, with contention.h's
// cost of overlap. The derivation, term by term: docs/throughput_model.md,
// "The model".
// Invariant: traffic per collective type equals what the engine's CommStats
// (shard and replicate groups) count for the same config and world on a rank
// of the predicted stage (tested under mpirun).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schema/config.h"
#include "cost_models/collective_model.h"
#include "cost_models/hardware_profile.h"
#include "cost_models/pipeline_model.h"
#include "cost_models/step_trace.h"

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
  double compute_seconds = 0;    // forward + backward + recomputation
  double recompute_seconds = 0;  // of compute_seconds: forwards redone in backward
  // Of compute_seconds: the slowest rank's compute beyond the mean rank's
  // (the profile's device.rate_dispersion over the world, slowest_rank.h).
  double straggler_seconds = 0;
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

// Refuses a config whose figures the profile lacks (hardware.missing_figure).
StepPrediction throughput_predict(const Config& config, int world, const HardwareProfile& hardware,
                                  const ThroughputOptions& options = {});

// The pipeline stage with the most forward + backward FLOPs per micro-batch
// (the first on a tie); 0 with one stage.
int pipeline_compute_stage(const Config& config);

}  // namespace llm
