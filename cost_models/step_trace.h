// The schedule of one training step as the real code issues it: every
// collective (operation, group, whose elements, wire type) and where it is
// issued and waited for relative to each unit's forward / backward compute
// and the optimizer step.
// It is recorded, not written down: the real ShardingEngine and Transformer
// run one step of a tiny stand-in model that has the config's unit structure
// (layer count, tied head, recompute, precision, reduce dtype, mode,
// world size, micro-batches per step, pipeline stage and schedule) over
// recording groups that count each call and move no data. With pipeline
// stages the stand-in is one stage, run by the real pipeline schedule; its
// messages to the neighbouring stages are not traced (pipeline_model.h sizes
// them). Each recorded collective is mapped back to the kind
// of unit it served (its element count identifies it: the stand-in's unit
// sizes are chosen so that their shards differ) and re-sized for the real
// config with the engine's documented shard arithmetic (s = ceil(n / S)).
// Invariant: a change to the engine's schedule (prefetch, caching, when
// reductions are issued or waited) changes the trace with it.
#pragma once

#include <cstddef>
#include <vector>

#include "schema/config.h"
#include "model/unit_provider.h"
#include "parallel/comm.h"

namespace llm {

enum class CollectiveOp { all_reduce, reduce_scatter, all_gather };
// Which group a collective ran on: the world (loss), the shard group, or the
// replicate group (ddp's gradients, hybrid's cross-replica all-reduce).
enum class GroupRole { world, shard, replicate };
// Whose elements a collective carries: a unit's shard (s elements; s = n for
// an unsharded group of one), or one double (scalar sums, never counted by
// CommStats).
enum class UnitKind { embed, block, head, scalar };

const char* collective_op_name(CollectiveOp op);

struct TracedCollective {
  CollectiveOp op;
  GroupRole group;
  UnitKind kind;
  WireType type;  // ignored for scalars (8-byte doubles)
};

// gradient_final: the engine announced the unit's reduced gradient final
// (ShardingEngine::on_gradient_final), where an offloaded optimizer starts
// the unit's copy to the host.
struct StepEvent {
  enum class Type { compute, optimizer, issue, wait, gradient_final };
  Type type;
  int unit = -1;              // compute, gradient_final: the unit (index into the layout)
  Pass pass = Pass::forward;  // compute
  int collective = -1;        // issue / wait: index into StepTrace::collectives
};

struct StepTrace {
  std::vector<TracedCollective> collectives;
  std::vector<StepEvent> events;
  int micro_batches = 1;
};

// Records one optimizer step of `config` on `world` data-parallel ranks (as
// seen by rank 0, which owns the largest shard) in the order
// Trainer::train_step runs it; with parallel.pipeline_parallel = P > 1, of
// pipeline stage `stage` (its units only, its micro-batches in the config's
// schedule). Tensor parallelism is not recorded (tensor_parallel must be 1).
StepTrace step_trace_record(const Config& config, int world, int stage = 0);

// Kind of unit `unit` of a layout with `num_units` units.
UnitKind unit_kind(int unit, int num_units);

// The engine's shard arithmetic (parallel/unit_shards.h): a unit of `numel`
// elements over a shard group of `group` ranks gives each rank
// ceil(numel / group) elements (the unit padded to a multiple of group).
inline size_t unit_shard_elements(size_t numel, int group) { return (numel + group - 1) / group; }

}  // namespace llm
