// What saving a checkpoint costs a plan row (docs/memory.md, "What a save
// costs"): the bytes each writing rank's shard holds (parallel/saved_state.h,
// the writer's own count), the time the busiest node takes to write its
// ranks' shards at the profile's disk rate, and the step loop's stall under
// checkpoint.async: the copy of a rank's shard to host memory over its host
// link (pcie: a PCIe copy on a GPU, a memcpy on the CPU backend). The copy
// is host memory the row needs beside its own; a row whose host memory per
// rank cannot hold it saves blocking, as the trainer does.
// Invariant: pure functions of the row's config and the profile.
#pragma once

#include <cstddef>

#include "cost_models/hardware_profile.h"
#include "cost_models/planner.h"

namespace llm {

struct SaveCost {
  size_t rank_bytes = 0;      // the largest writing rank's shard (meta.json aside)
  size_t node_bytes = 0;      // the busiest node's writing ranks together
  double write_seconds = 0;   // node_bytes / node.disk_write_gbps
  double stall_seconds = 0;   // an asynchronous save: rank_bytes over the rank's host link
  size_t host_available = 0;  // per rank: the node's host memory over its ranks
  bool copy_fits = false;     // the row's host memory and the copy fit in host_available
  bool async = false;         // checkpoint.async and copy_fits: the save runs beside training
  size_t host_bytes = 0;      // per rank: the row's host memory, plus the copy when async
};

SaveCost save_cost(const PlanRow& row, int world, const HardwareProfile& hardware);

}  // namespace llm
