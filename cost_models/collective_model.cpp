// NCCL's algorithm / protocol choice and the MPI ring (see collective_model.h).
// The constants are NCCL 2.14.3's (src/graph/tuning.cc, src/include/devcomm.h,
// src/enqueue.cc), quoted with their names there.
#include "cost_models/collective_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

namespace llm {
namespace {

constexpr int kTree = 0, kRing = 1;              // NCCL_ALGO_TREE, NCCL_ALGO_RING
constexpr int kLL = 0, kLL128 = 1, kSimple = 2;  // NCCL_PROTO_*
constexpr int kNvlink = 0, kPci = 1, kNet = 2;   // NCCL_HW_*

// baseLat: microseconds, Tree { LL, LL128, Simple }, Ring { LL, LL128, Simple }.
constexpr double kBaseLatency[2][3] = {{4.4, 4.4, 0}, {3.6, 10.0, 8.4}};
// hwLat: per step, NVLink / PCI / network.
constexpr double kHopLatency[3][2][3] = {
    {{.52, 1.25, 28}, {.47, 1.9, 3.4}},
    {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}},
    {{5.0, 8.5, 28}, {2.7, 4.0, 9.6}},
};
constexpr double kLL128MaxBandwidthPerChannel = 20.0;  // ll128MaxBwPerCh, GB/s
// llMaxBws[index1][index2]: index1 = one node ? Ampere : AMD host; index2 =
// one, two, more nodes.
constexpr double kLLMaxBandwidth[2][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}};
// perChMaxTreeBws[Ampere][index2].
constexpr double kTreeMaxBandwidthPerChannel[2][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}};
constexpr double kAmpereBusBandwidthCap =
    235.0;  // "if (compCap80) busBw = std::min(busBw, 235.0f)"
// treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B to 256 MiB.
constexpr double kTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6, .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6, .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
};
constexpr int kMaxChannels = 32;  // MAXCHANNELS
// Threads per block (NCCL_SIMPLE_MAX_NTHREADS, NCCL_LL_MAX_NTHREADS,
// NCCL_LL128_MAX_NTHREADS) and bytes per thread before another block is
// worth launching (NCCL_*_THREAD_THRESHOLD; LL's ring threshold x ranks).
constexpr int kThreads[3] = {512, 640, 512};
constexpr double kThreadThreshold[3] = {8, 8, 64};
constexpr double kPciBandwidth = 12.0;  // PCI_BW: below it Simple runs 256 threads

int log2_floor(double x) {
  int l = 0;
  for (uint64_t n = x < 1 ? 0 : static_cast<uint64_t>(x); n >>= 1;) ++l;
  return l;
}

// Channels of the group's ring graph: the intra-node search's on one node;
// across nodes one per NIC the group's ranks drive (at least one).
int graph_channels(const GroupSpan& span, const HardwareProfile& hw) {
  if (span.nodes == 1) return hw.nccl.intra_channels;
  const int per_node = hw.nccl.inter_channels * span.ranks_per_node / hw.node.devices_per_node;
  return std::max(1, per_node);
}

// CUDA blocks the kernel launches for `bytes` (enqueue.cc: one per channel,
// channels duplicated by connect.cc, fewer for small messages).
int nccl_blocks(int algorithm, int protocol, const GroupSpan& span, double bytes, double bus_gbs,
                int channels) {
  int blocks = std::min(kMaxChannels, 2 * channels);
  int threads = kThreads[protocol];
  if (protocol == kSimple && algorithm == kRing && bus_gbs <= kPciBandwidth) threads = 256;
  double threshold = kThreadThreshold[protocol];
  if (algorithm == kRing && protocol == kLL) threshold *= span.size;
  while (bytes < static_cast<double>(blocks) * threads * threshold) {
    if (blocks >= 2) {
      --blocks;
    } else if (threads % 128 == 0) {
      threads /= 2;
    } else {
      break;
    }
  }
  return blocks;
}

CollectiveCost mpi_ring_cost(CollectiveOp op, const GroupSpan& span, double payload_bytes,
                             const HardwareProfile& hw) {
  CollectiveCost cost;
  if (span.size <= 1) return cost;
  const double n = span.size;
  const bool all_reduce = op == CollectiveOp::all_reduce;
  const double steps = all_reduce ? 2 * (n - 1) : n - 1;
  const double inter_steps = all_reduce ? 2.0 * (span.nodes - 1) : span.nodes - 1.0;
  const double latency =
      1e-6 * (hw.collective.base_latency_us + (steps - inter_steps) * hw.intra_node.latency_us +
              inter_steps * hw.inter_node.latency_us);
  const double sent = (all_reduce ? 2 * (n - 1) / n : (n - 1) / n) * payload_bytes;
  cost.seconds = latency + sent / span_bandwidth(span, hw);
  cost.blocks = 1;  // the rank's own process moves its part
  return cost;
}

}  // namespace

const char* collective_algorithm_name(CollectiveAlgorithm algorithm) {
  return algorithm == CollectiveAlgorithm::tree ? "tree" : "ring";
}

const char* collective_protocol_name(CollectiveProtocol protocol) {
  switch (protocol) {
    case CollectiveProtocol::ll:
      return "LL";
    case CollectiveProtocol::ll128:
      return "LL128";
    case CollectiveProtocol::simple:
      return "Simple";
  }
  return "?";
}

std::string CollectiveCost::name() const {
  return fmt::format("{}/{}", collective_algorithm_name(algorithm),
                     collective_protocol_name(protocol));
}

GroupSpan group_span(GroupRole role, int world, int shard_group_size, int devices_per_node) {
  std::vector<int> ranks;
  if (role == GroupRole::world) {
    for (int r = 0; r < world; ++r) ranks.push_back(r);
  } else if (role == GroupRole::shard) {
    for (int r = 0; r < shard_group_size; ++r) ranks.push_back(r);
  } else {
    for (int r = 0; r < world; r += shard_group_size) ranks.push_back(r);
  }
  std::set<int> nodes;
  for (int r : ranks) nodes.insert(r / devices_per_node);
  GroupSpan span;
  span.size = static_cast<int>(ranks.size());
  span.nodes = static_cast<int>(nodes.size());
  span.ranks_per_node = (span.size + span.nodes - 1) / span.nodes;
  return span;
}

double span_bandwidth(const GroupSpan& span, const HardwareProfile& hw) {
  const double intra = hw.intra_node.bandwidth_gbs * 1e9;
  if (span.nodes == 1) return intra;
  return std::min(
      intra, hw.inter_node.bandwidth_gbs * 1e9 * span.ranks_per_node / hw.node.devices_per_node);
}

CollectiveCost nccl_cost(CollectiveOp op, const GroupSpan& span, double payload_bytes,
                         const HardwareProfile& hw, CollectiveAlgorithm algorithm,
                         CollectiveProtocol protocol) {
  CollectiveCost cost;
  cost.algorithm = algorithm;
  cost.protocol = protocol;
  if (span.size <= 1) return cost;
  const bool all_reduce = op == CollectiveOp::all_reduce;
  const int a = algorithm == CollectiveAlgorithm::tree ? kTree : kRing;
  const int p = protocol == CollectiveProtocol::ll      ? kLL
                : protocol == CollectiveProtocol::ll128 ? kLL128
                                                        : kSimple;
  const NcclProfile& nccl = hw.nccl;
  const bool ampere = nccl.gpu_arch == GpuArch::ampere;
  const bool ll128_on =
      (nccl.gpu_arch == GpuArch::volta || ampere) && nccl.intra_link == IntraLink::nvlink;
  if ((a == kTree && !all_reduce) || (p == kLL128 && !ll128_on)) {
    cost.seconds = -1;
    return cost;
  }
  const int n = span.size, nodes = span.nodes;
  const int index2 = nodes <= 2 ? nodes - 1 : 2;
  const int index1 = nodes == 1 ? (ampere ? 1 : 0) : (nccl.host_cpu == HostCpu::amd ? 1 : 0);
  const double ll_max = kLLMaxBandwidth[index1][index2];
  const double tree_max_per_channel = kTreeMaxBandwidthPerChannel[ampere ? 1 : 0][index2];
  const double ppn = static_cast<double>(n) / nodes;
  const int channels = graph_channels(span, hw);

  // Bus bandwidth, GB/s, with the protocol's efficiency and caps.
  const double graph_bus = span_bandwidth(span, hw) / 1e9;
  double bus = ampere ? std::min(graph_bus, kAmpereBusBandwidthCap) : graph_bus;
  if (a == kRing && p == kLL)
    bus = std::min(ll_max, bus * ((nodes > 1 || all_reduce) ? 1.0 / 4.0 : 1.0 / 3.0));
  if (a == kRing && p == kLL128) {
    bus = std::min(bus * (ppn < 2 ? 0.7 : 0.92), kLL128MaxBandwidthPerChannel * channels);
  }
  if (a == kTree) bus = std::min(bus * .92, channels * tree_max_per_channel);
  if (a == kTree && p == kLL) bus = std::min(bus / 3.8, ll_max);
  if (a == kTree && p == kLL128) {
    bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                   kLL128MaxBandwidthPerChannel * channels);
  }
  const int steps = all_reduce ? 2 * (n - 1) : n - 1;
  // 2.14 counts 2 x nodes network steps for a multi-node all-reduce (more than
  // its 2(n - 1) steps when every rank has a node of its own); kept as NCCL has it.
  const int inter_steps = all_reduce ? (nodes > 1 ? 2 * nodes : 0) : nodes - 1;
  double algorithm_bandwidth = bus * (a == kTree ? 0.5 : static_cast<double>(n) / steps);

  // Latency, microseconds.
  const int intra_hw = nccl.intra_link == IntraLink::nvlink ? kNvlink : kPci;
  double intra_latency = kHopLatency[intra_hw][a][p];
  const double inter_latency = kHopLatency[kNet][a][p];
  if (nodes > 1 && p == kLL) intra_latency *= 1.8;
  double latency = kBaseLatency[a][p];
  if (a == kRing) {
    latency += (steps - inter_steps) * intra_latency + inter_steps * inter_latency;
  } else {
    latency += 2 * ((n / nodes - 1) * intra_latency + log2_floor(nodes) * inter_latency);
  }

  // ncclTopoGetAlgoTime.
  const double bytes = payload_bytes;
  const int log_size = log2_floor(bytes / 64);
  if (a == kTree && log_size < 23) algorithm_bandwidth *= kTreeCorrection[p][log_size];
  if (a == kRing && p == kSimple && nodes > 1 && all_reduce && bytes >= n / 16.0 * 65536) {
    latency *= 1.9;  // "Plateau effect of ring"
  }
  cost.seconds = 1e-6 * (latency + bytes / (1000 * algorithm_bandwidth));
  cost.blocks = nccl_blocks(a, p, span, bytes, graph_bus, channels);
  return cost;
}

CollectiveCost collective_cost(CollectiveOp op, const GroupSpan& span, double payload_bytes,
                               const HardwareProfile& hw) {
  if (!hw.uses_nccl()) return mpi_ring_cost(op, span, payload_bytes, hw);
  CollectiveCost best;
  best.seconds = -1;
  if (span.size <= 1)
    return nccl_cost(op, span, payload_bytes, hw, CollectiveAlgorithm::ring,
                     CollectiveProtocol::simple);
  // getAlgoInfo's order: tree before ring, LL before LL128 before Simple;
  // the first strictly fastest wins.
  for (CollectiveAlgorithm a : {CollectiveAlgorithm::tree, CollectiveAlgorithm::ring}) {
    for (CollectiveProtocol p :
         {CollectiveProtocol::ll, CollectiveProtocol::ll128, CollectiveProtocol::simple}) {
      const CollectiveCost c = nccl_cost(op, span, payload_bytes, hw, a, p);
      if (c.seconds >= 0 && (best.seconds < 0 || c.seconds < best.seconds)) best = c;
    }
  }
  return best;
}

double collective_seconds(CollectiveOp op, const GroupSpan& span, double payload_bytes,
                          const HardwareProfile& hw) {
  return collective_cost(op, span, payload_bytes, hw).seconds;
}

double point_to_point_seconds(const GroupSpan& link, double bytes, const HardwareProfile& hw) {
  if (link.size <= 1) return 0;
  const double hop = link.nodes > 1 ? hw.inter_node.latency_us : hw.intra_node.latency_us;
  return 1e-6 * (hw.collective.base_latency_us + hop) + bytes / span_bandwidth(link, hw);
}

}  // namespace llm
