// Whether this node's ranks may each open NCCL on the GPU they are given
// (node-local rank modulo the GPUs): one GPU per rank, as NCCL requires; or,
// for testing, several ranks per GPU when every rank carries an NCCL_HOSTID
// of its own, which NCCL takes as its host, so it joins the ranks as
// separate hosts through its socket transport (tools/one_gpu_ranks.sh sets
// this up; docs/gpu.md#many-nccl-ranks-on-one-gpu). Otherwise refused.
#pragma once

#include <string>

namespace llm {

struct NcclPlacement {
  bool admitted = true;
  bool shared_gpu = false;  // admitted through per-rank host ids
  std::string reason;       // why not, or how the GPU is shared
};

// From this node's ranks and their NCCL_HOSTID (parallel/comm.h).
NcclPlacement nccl_placement(int gpus);

}  // namespace llm
