// Reading cost_models/hardware/*.toml into a HardwareProfile, and the per-rank figures
// derived from it.
#include "cost_models/hardware_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "schema/toml_tables.h"
#include "base/error.h"
#include "cost_models/planner.h"

namespace llm {
namespace {

constexpr const char* kDispersion = "rate_dispersion";

void validate(const HardwareProfile& p) {
  const std::string& f = p.path;
  LLM_CHECK(p.device.peak_tflops_bf16 >= 0 && p.device.peak_tflops_fp32 >= 0,
            "{}: device.peak_tflops_bf16 and peak_tflops_fp32 must not be negative (0: not known)",
            f);
  LLM_CHECK(p.device.sustained_fraction > 0 && p.device.sustained_fraction <= 1,
            "{}: device.sustained_fraction must be in (0, 1]", f);
  LLM_CHECK(p.device.memory_bandwidth_gbs > 0, "{}: device.memory_bandwidth_gbs must be positive",
            f);
  LLM_CHECK(p.node.devices_per_node >= 1, "{}: node.devices_per_node must be at least 1", f);
  LLM_CHECK(p.intra_node.bandwidth_gbs > 0 && p.inter_node.bandwidth_gbs > 0,
            "{}: intra_node.bandwidth_gbs and inter_node.bandwidth_gbs must be positive", f);
  LLM_CHECK(p.intra_node.latency_us >= 0 && p.inter_node.latency_us >= 0 &&
                p.collective.base_latency_us >= 0,
            "{}: latencies must not be negative", f);
  LLM_CHECK(p.host.adamw_params_per_s > 0 && p.host.accumulate_params_per_s > 0,
            "{}: host.adamw_params_per_s and host.accumulate_params_per_s must be positive", f);
  LLM_CHECK(p.pcie.bandwidth_gbs > 0, "{}: pcie.bandwidth_gbs must be positive", f);
  LLM_CHECK(p.pcie.latency_us >= 0, "{}: pcie.latency_us must not be negative", f);
  LLM_CHECK(p.device.compute_units >= 1, "{}: device.compute_units must be at least 1", f);
  LLM_CHECK(p.device.rate_dispersion >= 0 && p.device.rate_dispersion <= 1,
            "{}: device.rate_dispersion must be in [0, 1], got {}", f, p.device.rate_dispersion);
  if (p.uses_nccl()) {
    const NcclProfile& n = p.nccl;
    LLM_CHECK(n.intra_channels >= 1 && n.inter_channels >= 1,
              "{}: nccl.intra_channels and nccl.inter_channels must be at least 1", f);
  }
  parse_bytes(p.device.memory, f + ": device.memory");
  if (p.device.reserved_memory != "0")
    parse_bytes(p.device.reserved_memory, f + ": device.reserved_memory");
}

}  // namespace

HardwareProfile hardware_parse(const std::string& toml_text, const std::string& origin) {
  HardwareProfile profile;
  profile.path = origin;
  toml::table root = parse_toml(toml_text, origin);
  // device.rate_dispersion came after profiles were written, and 0 (no
  // spread known) is what they meant: a profile without it reads 0.
  if (toml::table* device = root["device"].as_table(); device && !device->contains(kDispersion))
    device->insert(kDispersion, 0.0);
  read_toml_tables(profile, root, origin, Omitted::is_error);
  validate(profile);
  return profile;
}

HardwareProfile hardware_load(const std::string& path) {
  std::string text;
  {
    std::ifstream in(path);
    LLM_CHECK(in, "cannot open hardware profile '{}'", path);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return hardware_parse(text, path);
}

// fp8 is planned at the bf16 rate: the throughput model does not count the
// FP8 tensor cores' speed, only bf16's (a lower bound for fp8).
double HardwareProfile::rank_flops(Precision precision, int ranks_per_node) const {
  double peak = stores_bf16(precision) ? device.peak_tflops_bf16 : device.peak_tflops_fp32;
  double rate = peak * 1e12 * device.sustained_fraction;
  return device.shared_by_node ? rate / std::max(ranks_per_node, 1) : rate;
}

MemoryBudget HardwareProfile::rank_memory(int ranks_per_node) const {
  MemoryBudget budget{
      parse_bytes(device.memory, path + ": device.memory"),
      device.reserved_memory == "0" ? 0 : parse_bytes(device.reserved_memory, path + ": reserved")};
  if (device.shared_by_node) {
    budget.device /= std::max(ranks_per_node, 1);
    budget.reserved /= std::max(ranks_per_node, 1);
  }
  return budget;
}

size_t HardwareProfile::rank_memory_bytes(int ranks_per_node) const {
  return rank_memory(ranks_per_node).usable();
}

std::string HardwareProfile::missing_figure(const Config& config) const {
  const bool bf16 = stores_bf16(config.precision());
  if ((bf16 ? device.peak_tflops_bf16 : device.peak_tflops_fp32) > 0) return "";
  return fmt::format("{} gives device.peak_tflops_{} = 0 (not known): no {} compute rate", path,
                     bf16 ? "bf16" : "fp32", bf16 ? "bf16" : "fp32");
}

double HardwareProfile::rank_memory_bandwidth(int ranks_per_node) const {
  double bandwidth = device.memory_bandwidth_gbs * 1e9;
  return device.shared_by_node ? bandwidth / std::max(ranks_per_node, 1) : bandwidth;
}

double HardwareProfile::rank_host_adamw_rate(int ranks_per_node) const {
  return host.adamw_params_per_s / std::max(ranks_per_node, 1);
}

double HardwareProfile::rank_host_accumulate_rate(int ranks_per_node) const {
  return host.accumulate_params_per_s / std::max(ranks_per_node, 1);
}

double HardwareProfile::rank_pcie_bandwidth(int ranks_per_node) const {
  double bandwidth = pcie.bandwidth_gbs * 1e9;
  return device.shared_by_node ? bandwidth / std::max(ranks_per_node, 1) : bandwidth;
}

}  // namespace llm
