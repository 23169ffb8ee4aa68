// A hardware profile: the few numbers the throughput model needs about a
// cluster (device compute and memory, devices per node, intra- and
// inter-node links, the collective library and, for NCCL, what its topology
// search finds, and for offloaded optimizers the host's AdamW and
// accumulation rates and the host <-> device link), read from a TOML file in
// cost_models/hardware/. Every key is listed
// once in its table's visit_fields(); unknown keys and missing files are
// errors naming the file and key, so a profile cannot silently fall back to
// defaults it did not mean (but for device.rate_dispersion, added later,
// whose default 0 is what the profiles written before it meant). The
// [nccl] table is required exactly when collective.library = "nccl".
#pragma once

#include <string>

#include "schema/config.h"

namespace llm {

// Which collective cost model a profile uses (collective.library).
enum class CollectiveLibrary { mpi, nccl };
inline constexpr EnumName<CollectiveLibrary> kCollectiveLibraryNames[] = {
    {"mpi", CollectiveLibrary::mpi}, {"nccl", CollectiveLibrary::nccl}};
constexpr std::span<const EnumName<CollectiveLibrary>> enum_names(CollectiveLibrary) {
  return kCollectiveLibraryNames;
}
// The facts NCCL's tuning tables key on (nccl.gpu_arch, host_cpu, intra_link).
enum class GpuArch { volta, ampere, hopper };
inline constexpr EnumName<GpuArch> kGpuArchNames[] = {
    {"volta", GpuArch::volta}, {"ampere", GpuArch::ampere}, {"hopper", GpuArch::hopper}};
constexpr std::span<const EnumName<GpuArch>> enum_names(GpuArch) { return kGpuArchNames; }
enum class HostCpu { amd, intel };
inline constexpr EnumName<HostCpu> kHostCpuNames[] = {{"amd", HostCpu::amd},
                                                      {"intel", HostCpu::intel}};
constexpr std::span<const EnumName<HostCpu>> enum_names(HostCpu) { return kHostCpuNames; }
enum class IntraLink { nvlink, pci };
inline constexpr EnumName<IntraLink> kIntraLinkNames[] = {{"nvlink", IntraLink::nvlink},
                                                          {"pci", IntraLink::pci}};
constexpr std::span<const EnumName<IntraLink>> enum_names(IntraLink) { return kIntraLinkNames; }

// What a rank may use: the device's memory less what the runtime keeps.
struct MemoryBudget {
  size_t device = 0;
  size_t reserved = 0;
  size_t usable() const { return device > reserved ? device - reserved : 0; }
};

struct DeviceProfile {
  std::string memory = "80GiB";
  std::string reserved_memory = "0";
  double peak_tflops_bf16 = 0;
  double peak_tflops_fp32 = 0;
  double sustained_fraction = 1.0;
  double memory_bandwidth_gbs = 0;
  bool shared_by_node = false;
  int compute_units = 1;
  double rate_dispersion = 0;

  template <class V>
  void visit_fields(V&& v) {
    v("memory", memory, "memory of one device (for a shared node: of the whole node)");
    v("reserved_memory", reserved_memory, "memory the runtime keeps (context, allocator slack)");
    v("peak_tflops_bf16", peak_tflops_bf16,
      "dense matmul peak with bf16 inputs, TFLOP/s (0: not known; bf16 steps are not predicted)");
    v("peak_tflops_fp32", peak_tflops_fp32,
      "dense matmul peak with fp32 inputs, TFLOP/s (0: not known; fp32 steps are not predicted)");
    v("sustained_fraction", sustained_fraction, "fraction of the peak a training step sustains");
    v("memory_bandwidth_gbs", memory_bandwidth_gbs, "memory bandwidth (optimizer step), GB/s");
    v("shared_by_node", shared_by_node,
      "true: compute and memory are the node's, shared by the ranks on it (CPU)");
    v("compute_units", compute_units,
      "streaming multiprocessors (GPU) or cores (CPU) of one device; a collective's CUDA blocks "
      "hold some of them while it runs (contention.h)");
    v("rate_dispersion", rate_dispersion,
      "relative standard deviation of the sustained compute rate among devices of this kind (0: "
      "no spread, or none known); a step waits for the slowest of its ranks (slowest_rank.h). "
      "The one key a profile may leave out: it then reads 0");
  }
};

struct NodeProfile {
  int devices_per_node = 8;

  template <class V>
  void visit_fields(V&& v) {
    v("devices_per_node", devices_per_node, "ranks (devices) per node; hybrid shards within one");
  }
};

// One kind of link, in NCCL's ring terms: a collective over n ranks takes
// base + steps x latency + bytes sent per rank / bus bandwidth.
struct LinkProfile {
  double bandwidth_gbs = 0;
  double latency_us = 0;

  template <class V>
  void visit_fields(V&& v) {
    v("bandwidth_gbs", bandwidth_gbs,
      "bus bandwidth, GB/s (intra: per device; inter: per node, all of its NICs)");
    v("latency_us", latency_us, "latency of one ring step over this link, microseconds");
  }
};

struct CollectiveProfile {
  CollectiveLibrary library = CollectiveLibrary::mpi;
  double base_latency_us = 0;
  bool async_progress = true;

  template <class V>
  void visit_fields(V&& v) {
    v("library", library,
      "nccl: NCCL's algorithm and protocol choice (collective_model.h, needs [nccl]); "
      "mpi: one ring with the links' latency and bandwidth");
    v("base_latency_us", base_latency_us,
      "fixed cost of launching one collective, microseconds (mpi rings and point-to-point)");
    v("async_progress", async_progress,
      "true: collectives run while compute runs (NCCL streams); false: they run when waited on");
  }
};

// What NCCL's topology search (src/graph/search.cc) finds on this cluster,
// and the hardware facts its tuning tables (src/graph/tuning.cc) key on.
// Used only with collective.library = "nccl".
struct NcclProfile {
  GpuArch gpu_arch = GpuArch::ampere;
  HostCpu host_cpu = HostCpu::amd;
  IntraLink intra_link = IntraLink::nvlink;
  int intra_channels = 1;
  int inter_channels = 1;

  template <class V>
  void visit_fields(V&& v) {
    v("gpu_arch", gpu_arch,
      "picks NCCL's per-architecture bandwidth caps and whether LL128 is on by default");
    v("host_cpu", host_cpu, "NCCL's LL bandwidth cap across nodes depends on it");
    v("intra_link", intra_link, "the link between GPUs of a node");
    v("intra_channels", intra_channels,
      "channels of the ring graph NCCL's search builds inside one node (intra_node.bandwidth_gbs "
      "is "
      "their bus bandwidth together)");
    v("inter_channels", inter_channels,
      "channels of the ring graph across nodes when a node's every device is in the group (one per "
      "NIC; inter_node.bandwidth_gbs is their bus bandwidth together)");
  }
};

// The host side of an offloaded optimizer (offload_model.h): rates of the
// node's CPUs and memory, shared by the node's ranks.
struct HostProfile {
  double adamw_params_per_s = 0;
  double accumulate_params_per_s = 0;

  template <class V>
  void visit_fields(V&& v) {
    v("adamw_params_per_s", adamw_params_per_s,
      "host AdamW elements per second of the whole node (all its cores; fp32 master, moments and "
      "gradient, plus the compute copy), shared by the node's ranks");
    v("accumulate_params_per_s", accumulate_params_per_s,
      "host gradient accumulation (one fp32 add per element) per second of the whole node, shared "
      "by the node's ranks");
  }
};

// The host <-> device link (PCIe, or a memcpy where the device is the host).
struct PcieProfile {
  double bandwidth_gbs = 0;
  double latency_us = 0;

  template <class V>
  void visit_fields(V&& v) {
    v("bandwidth_gbs", bandwidth_gbs,
      "GB/s per device per direction while every device of the node copies (shared_by_node: the "
      "node's, divided among its ranks)");
    v("latency_us", latency_us, "fixed cost of one copy, microseconds");
  }
};

struct HardwareProfile {
  std::string path;
  std::string name;
  DeviceProfile device;
  NodeProfile node;
  LinkProfile intra_node;
  LinkProfile inter_node;
  CollectiveProfile collective;
  HostProfile host;
  PcieProfile pcie;
  NcclProfile nccl;  // read only with collective.library = nccl

  bool uses_nccl() const { return collective.library == CollectiveLibrary::nccl; }

  template <class V>
  void visit_fields(V&& v) {
    v("name", name, "what the profile describes, for reports");
  }
  // [nccl] comes after [collective], whose library says whether it is read.
  template <class V>
  void visit_tables(V&& v) {
    v("device", device);
    v("node", node);
    v("intra_node", intra_node);
    v("inter_node", inter_node);
    v("collective", collective);
    v("host", host);
    v("pcie", pcie);
    if (uses_nccl()) v("nccl", nccl);
  }

  // Sustained matmul rate of one rank, FLOP/s, for a config's precision and
  // `ranks_per_node` ranks sharing a node (only matters when shared_by_node).
  double rank_flops(Precision precision, int ranks_per_node) const;
  // One rank's memory and what the runtime keeps of it (for a shared node:
  // its share of both).
  MemoryBudget rank_memory(int ranks_per_node) const;
  // Memory one rank may use: rank_memory(ranks_per_node).usable().
  size_t rank_memory_bytes(int ranks_per_node) const;
  // The figure a prediction of `config` needs that this profile gives as 0
  // (not known), as a sentence naming the key and the profile; empty when it
  // has every one. The throughput model refuses such a config; the planner
  // reports its rows unranked with this reason.
  std::string missing_figure(const Config& config) const;
  double rank_memory_bandwidth(int ranks_per_node) const;  // bytes/s
  // One rank's share of the host: AdamW and accumulated elements per second.
  double rank_host_adamw_rate(int ranks_per_node) const;
  double rank_host_accumulate_rate(int ranks_per_node) const;
  // One rank's host <-> device bandwidth per direction, bytes/s.
  double rank_pcie_bandwidth(int ranks_per_node) const;
};

// Reads and validates a profile; errors name the file and the key.
HardwareProfile hardware_load(const std::string& path);
HardwareProfile hardware_parse(const std::string& toml_text, const std::string& origin);

}  // namespace llm
