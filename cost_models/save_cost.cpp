// What saving a checkpoint costs a plan row (see save_cost.h).
#include "cost_models/save_cost.h"

#include <algorithm>
#include <map>

#include "model/layout.h"
#include "parallel/saved_state.h"
#include "parallel/topology.h"

namespace llm {

SaveCost save_cost(const PlanRow& row, int world, const HardwareProfile& hardware) {
  const Config& config = row.config;
  const int T = row.tensor_parallel, P = row.pipeline_parallel, D = row.data_parallel;
  const int S = sharding_plan(config.parallel, D).shard_group_size;
  const int ranks_per_node = hardware.ranks_per_node(world);
  SaveCost cost;
  std::map<int, size_t> node_bytes;
  for (const int rank : checkpoint_writer_ranks(T, D, P, S)) {
    // World rank t + T (d + D p): tensor rank t, data rank d, stage p.
    const ModelSlice slice{rank % T, T, rank / (T * D), P};
    const int shard_rank = (rank / T) % D;
    const size_t bytes =
        saved_state_bytes(unit_shards(layout_build(config.model, slice), S, shard_rank));
    cost.rank_bytes = std::max(cost.rank_bytes, bytes);
    node_bytes[rank / ranks_per_node] += bytes;
  }
  for (const auto& [node, bytes] : node_bytes) cost.node_bytes = std::max(cost.node_bytes, bytes);
  cost.write_seconds = static_cast<double>(cost.node_bytes) / (hardware.node.disk_write_gbps * 1e9);
  cost.stall_seconds =
      static_cast<double>(cost.rank_bytes) / hardware.rank_pcie_bandwidth(ranks_per_node);
  // On a shared node (the CPU backend) the device's memory is the host's.
  const size_t own =
      row.memory.state.host + (hardware.device.shared_by_node ? row.memory.total() : 0);
  cost.host_available = hardware.rank_host_memory(ranks_per_node);
  cost.copy_fits = own + cost.rank_bytes <= cost.host_available;
  cost.async = config.checkpoint.async && cost.copy_fits;
  cost.host_bytes = own + (cost.async ? cost.rank_bytes : 0);
  return cost;
}

}  // namespace llm
