// Reading planning/hardware/*.toml into a HardwareProfile, and the per-rank figures
// derived from it.
#include "planning/hardware_profile.h"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include "runtime/error.h"
#include "planning/planner.h"

namespace llm {
namespace {

void read_value(const toml::node& node, double& out, const std::string& key) {
  LLM_CHECK(node.is_number(), "{}: expected a number", key);
  out = *node.value<double>();
}
void read_value(const toml::node& node, int& out, const std::string& key) {
  auto value = node.value_exact<int64_t>();
  LLM_CHECK(value.has_value(), "{}: expected an integer", key);
  out = static_cast<int>(*value);
}
void read_value(const toml::node& node, bool& out, const std::string& key) {
  auto value = node.value_exact<bool>();
  LLM_CHECK(value.has_value(), "{}: expected true or false", key);
  out = *value;
}
void read_value(const toml::node& node, std::string& out, const std::string& key) {
  auto value = node.value_exact<std::string>();
  LLM_CHECK(value.has_value(), "{}: expected a string", key);
  out = *value;
}

void validate(const HardwareProfile& p) {
  const std::string& f = p.path;
  LLM_CHECK(p.device.peak_tflops_bf16 > 0 && p.device.peak_tflops_fp32 > 0,
            "{}: device.peak_tflops_bf16 and peak_tflops_fp32 must be positive", f);
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
  LLM_CHECK(p.collective.library == "nccl" || p.collective.library == "mpi",
            "{}: collective.library must be \"nccl\" or \"mpi\", got \"{}\"", f,
            p.collective.library);
  if (p.uses_nccl()) {
    const NcclProfile& n = p.nccl;
    LLM_CHECK(n.gpu_arch == "volta" || n.gpu_arch == "ampere" || n.gpu_arch == "hopper",
              "{}: nccl.gpu_arch must be volta, ampere or hopper, got \"{}\"", f, n.gpu_arch);
    LLM_CHECK(n.host_cpu == "amd" || n.host_cpu == "intel",
              "{}: nccl.host_cpu must be amd or intel", f);
    LLM_CHECK(n.intra_link == "nvlink" || n.intra_link == "pci",
              "{}: nccl.intra_link must be nvlink or pci", f);
    LLM_CHECK(n.intra_channels >= 1 && n.inter_channels >= 1,
              "{}: nccl.intra_channels and nccl.inter_channels must be at least 1", f);
  }
  parse_bytes(p.device.memory, f + ": device.memory");
  if (p.device.reserved_memory != "0")
    parse_bytes(p.device.reserved_memory, f + ": device.reserved_memory");
}

}  // namespace

HardwareProfile hardware_parse(const std::string& toml_text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    LLM_FAIL("{}: {}", origin, e.description());
  }
  HardwareProfile profile;
  profile.path = origin;
  std::set<std::string> known = {"name"};
  if (const toml::node* name = root.get("name")) read_value(*name, profile.name, origin + ": name");
  profile.visit_tables([&](const char* table_name, auto& section) {
    known.insert(table_name);
    const toml::node* node = root.get(table_name);
    if (std::string(table_name) == "nccl" && !profile.uses_nccl()) {
      // [collective] comes first: [nccl] belongs to the NCCL model only.
      LLM_CHECK(!node, "{}: [nccl] is read only with collective.library = \"nccl\"", origin);
      return;
    }
    LLM_CHECK(node && node->is_table(), "{}: missing table [{}]", origin, table_name);
    const toml::table& table = *node->as_table();
    std::set<std::string> fields;
    section.visit_fields([&](const char* key, auto& field, const char*) {
      fields.insert(key);
      const std::string where = fmt::format("{}: {}.{}", origin, table_name, key);
      const toml::node* value = table.get(key);
      LLM_CHECK(value, "{}: missing", where);
      read_value(*value, field, where);
    });
    for (auto&& [key, value] : table) {
      LLM_CHECK(fields.count(std::string(key.str())), "{}: unknown key {}.{}", origin, table_name,
                key.str());
    }
  });
  for (auto&& [key, value] : root) {
    LLM_CHECK(known.count(std::string(key.str())), "{}: unknown table or key '{}'", origin,
              key.str());
  }
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

double HardwareProfile::rank_flops(Precision precision, int ranks_per_node) const {
  double peak = precision == Precision::bf16 ? device.peak_tflops_bf16 : device.peak_tflops_fp32;
  double rate = peak * 1e12 * device.sustained_fraction;
  return device.shared_by_node ? rate / std::max(ranks_per_node, 1) : rate;
}

size_t HardwareProfile::rank_memory_bytes(int ranks_per_node) const {
  size_t total = parse_bytes(device.memory, path + ": device.memory");
  size_t reserved =
      device.reserved_memory == "0" ? 0 : parse_bytes(device.reserved_memory, path + ": reserved");
  size_t usable = total > reserved ? total - reserved : 0;
  return device.shared_by_node ? usable / std::max(ranks_per_node, 1) : usable;
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
