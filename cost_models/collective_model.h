// What one collective costs and what it holds while it runs, as the
// profile's collective library would run it.
//  - library = "nccl": NCCL 2.14.3's own tuning model (the NCCL that
//    PyTorch 1.13 and 2.0 wheels bundle, the FSDP paper's era): every
//    algorithm it has for the operation (ring; tree for all-reduce only)
//    with every protocol (LL, LL128, Simple) gets a latency (src/graph/
//    tuning.cc baseLat + per-step hwLat of NVLink, PCI or the network, the
//    steps a ring or a tree takes) and an algorithm bandwidth (the ring
//    graph's bus bandwidth with the protocol's efficiency and caps, the
//    tree's correction factor by size); time = latency + bytes / bandwidth,
//    and the fastest enabled pair is chosen, as enqueue.cc getAlgoInfo
//    does. LL128 is on by default only on Volta / Ampere with NVLink. The
//    bus bandwidth and the number of channels are what the topology search
//    finds (the profile's [nccl] table says how).
//    The collective's kernel launches one CUDA block per channel: twice the
//    search's channels (connect.cc duplicates them; at most 32), fewer while
//    the message is smaller than channels x threads x the protocol's
//    per-thread threshold (enqueue.cc). Each block holds one SM for the
//    collective's duration (contention.h).
//  - library = "mpi": one ring (Open MPI's large-message algorithm on
//    shared memory) with the profile's calibrated per-step latency and bus
//    bandwidth; one process drives it (one compute unit).
// A group spanning nodes gets its ranks' share of their node's NICs (rail-
// optimized: each GPU drives its own NIC), never more than the intra-node
// bandwidth.
// Invariant: with NCCL's ring and Simple protocol forced, the cost is the
// alpha-beta ring formula of the "mpi" library with NCCL's Simple latencies
// (tested); the chosen pair is never slower than any enabled pair.
#pragma once

#include <string>

#include "cost_models/hardware_profile.h"
#include "cost_models/step_trace.h"

namespace llm {

// Which ranks a group holds, in nodes of the profile: shard groups are blocks
// of consecutive ranks, replicate groups every S-th rank (topology.h).
struct GroupSpan {
  int size = 1, nodes = 1, ranks_per_node = 1;
};
GroupSpan group_span(GroupRole role, int world, int shard_group_size, int devices_per_node);

enum class CollectiveAlgorithm { ring, tree };
enum class CollectiveProtocol { ll, ll128, simple };
const char* collective_algorithm_name(CollectiveAlgorithm algorithm);
const char* collective_protocol_name(CollectiveProtocol protocol);

struct CollectiveCost {
  double seconds = 0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  CollectiveProtocol protocol = CollectiveProtocol::simple;
  int blocks = 0;  // compute units (SMs, or cores under MPI) held while it runs; 0 for one rank
  std::string name() const;  // "ring/LL128"
};

// The cost of one collective whose full logical buffer is payload_bytes
// (all-gather: the gathered buffer; reduce-scatter: the input; all-reduce:
// the buffer), as the library chooses to run it.
CollectiveCost collective_cost(CollectiveOp op, const GroupSpan& span, double payload_bytes,
                               const HardwareProfile& hardware);

// NCCL's cost of one algorithm and protocol; seconds < 0 when NCCL would not
// run it (the algorithm does not exist for the operation, or the protocol is
// off by default on this hardware).
CollectiveCost nccl_cost(CollectiveOp op, const GroupSpan& span, double payload_bytes,
                         const HardwareProfile& hardware, CollectiveAlgorithm algorithm,
                         CollectiveProtocol protocol);

// collective_cost(...).seconds.
double collective_seconds(CollectiveOp op, const GroupSpan& span, double payload_bytes,
                          const HardwareProfile& hardware);

// Seconds of one point-to-point message of `bytes` over `link` (2 ranks, on
// one node or two): base latency + the link's latency + bytes / bandwidth.
double point_to_point_seconds(const GroupSpan& link, double bytes, const HardwareProfile& hardware);

// Bus bandwidth of a group's ring, bytes/s: the intra-node link's, or across
// nodes the group's ranks' share of their node's NICs, if that is slower.
double span_bandwidth(const GroupSpan& span, const HardwareProfile& hardware);

}  // namespace llm
