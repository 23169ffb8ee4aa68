// NCCL's placement rule and its testing exception (parallel/nccl_placement.h).
#include "parallel/nccl_placement.h"

#include <fmt/format.h>

#include <set>
#include <vector>

#include "parallel/comm.h"

namespace llm {

NcclPlacement nccl_placement(int gpus) {
  const std::vector<std::string>& host_ids = comm_local_nccl_host_ids();
  const int ranks = static_cast<int>(host_ids.size());
  NcclPlacement placement;
  if (ranks <= gpus) return placement;
  const std::set<std::string> distinct(host_ids.begin(), host_ids.end());
  if (!distinct.count("") && static_cast<int>(distinct.size()) == ranks) {
    placement.shared_gpu = true;
    placement.reason = fmt::format(
        "{} NCCL ranks share {} GPU(s): each rank has an NCCL_HOSTID of its own, so NCCL "
        "joins them as separate hosts through its socket transport; for testing, not speed",
        ranks, gpus);
    return placement;
  }
  placement.admitted = false;
  placement.reason = fmt::format(
      "{} ranks on this node share {} GPU(s); NCCL needs one GPU per rank (set parallel.comm "
      "= mpi to share a GPU, or, for testing, give every rank an NCCL_HOSTID of its own: "
      "tools/one_gpu_ranks.sh)",
      ranks, gpus);
  return placement;
}

}  // namespace llm
