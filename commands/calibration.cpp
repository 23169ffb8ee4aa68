// Measuring this machine into a hardware profile (see calibration.h).
#include "commands/calibration.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <vector>

#include "model/kernels/cpu_gemm.h"
#include "model/kernels/cpu_gemm_rate.h"
#include "schema/config.h"
#include "model/kernels/adamw.h"
#include "device/device_memory.h"
#include "base/error.h"
#include "cost_models/hardware_profile.h"
#include "base/system.h"
#include "cost_models/throughput_model.h"

namespace llm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Bytes read + written per second by a parallel copy, best of 5.
double measure_copy_bandwidth() {
  const size_t n = 64u << 20;  // floats: 256 MiB per array
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    auto start = Clock::now();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) b[i] = a[i];
    best = std::min(best, seconds_between(start, Clock::now()));
  }
  return 2.0 * n * sizeof(float) / best;
}

// Seconds of the fastest of `reps` runs of `f`.
template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    f(r);
    best = std::min(best, seconds_between(start, Clock::now()));
  }
  return best;
}

struct CommCalibration {
  int ranks = 0;
  double latency_us = 0, alpha_us = 0, bandwidth_gbs = 0;
};

CommCalibration run_comm_bench(const CalibrationOptions& options) {
  namespace fs = std::filesystem;
  fs::create_directories(options.measure.work_dir);
  const std::string out = (fs::path(options.measure.work_dir) / "comm_bench.log").string();
  std::string command = fmt::format("{} -np 2 {} scale --comm-bench > '{}' 2>&1",
                                    options.measure.launcher, options.measure.train_binary, out);
  LLM_CHECK(run_command(command) == 0, "comm bench failed; see {}", out);
  std::ifstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("comm_bench")) continue;
    const nlohmann::json& c = j["comm_bench"];
    return {c["ranks"].get<int>(), c["latency_us"].get<double>(), c["alpha_us"].get<double>(),
            c["bandwidth_gbs"].get<double>()};
  }
  LLM_FAIL("comm bench printed no result; see {}", out);
}

std::string today() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d", std::gmtime(&now));
  return text;
}

}  // namespace

HostRates calibrate_host_rates() {
  const size_t n = 64u << 20;  // elements: 256 MiB per fp32 array
  std::vector<float> params(n, 1.0f), grads(n, 1e-3f), m(n, 0.0f), v(n, 0.0f), sum(n, 0.0f);
  std::vector<Bf16> copy(n);
  HostRates rates;
  rates.adamw_params_per_s =
      n / best_seconds(5, [&](int r) {
        cpu::adamw_update(params.data(), copy.data(), grads.data(), m.data(), v.data(), n, 1e-4f,
                          0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, r + 1);
      });
  rates.accumulate_params_per_s = n / best_seconds(5, [&](int) {
#pragma omp parallel for simd schedule(static)
                                    for (size_t i = 0; i < n; ++i) sum[i] += grads[i];
                                  });
  const DeviceMemory& memory = host_memory();
  rates.copy_bytes_per_s = n * sizeof(float) / best_seconds(5, [&](int) {
                             memory.to_device(sum.data(), params.data(), n * sizeof(float));
                           });
  return rates;
}

void comm_bench(Group& world) {
  const int n = world.size();
  LLM_CHECK(n >= 2, "--comm-bench needs at least 2 ranks (run it under mpirun -np 2)");
  struct Point {
    double bytes, seconds;
  };
  std::vector<Point> points;
  std::vector<float> buffer(16u << 20);  // 64 MiB
  for (size_t count : {size_t{2}, size_t{1} << 10, size_t{1} << 14, size_t{1} << 18,
                       size_t{4} << 20, size_t{16} << 20}) {
    const int reps = static_cast<int>(std::clamp<size_t>((size_t{64} << 20) / (count * 4), 3, 200));
    double best = 1e30;
    for (int trial = 0; trial < 4; ++trial) {  // the first trial warms up
      world.barrier();
      auto start = Clock::now();
      for (int r = 0; r < reps; ++r) world.all_reduce(buffer.data(), count, WireType::f32);
      double seconds = seconds_between(start, Clock::now()) / reps;
      if (trial > 0) best = std::min(best, seconds);
    }
    points.push_back({4.0 * count, world.all_reduce_sum(best) / n});
  }
  const Point& small = points.front();
  const Point& large = points.back();
  const double ring = 2.0 * (n - 1) / n;  // bytes sent per payload byte
  // The large all-reduce's time beyond the latency is its bytes' transfer.
  const double bandwidth = ring * large.bytes / std::max(large.seconds - small.seconds, 1e-12);
  if (world.rank() == 0) {
    nlohmann::json result = {{"ranks", n},
                             {"latency_us", small.seconds * 1e6},
                             {"alpha_us", small.seconds * 1e6 / (2.0 * (n - 1))},
                             {"bandwidth_gbs", bandwidth / 1e9}};
    fmt::print("{}\n", nlohmann::json{{"comm_bench", result}}.dump());
  }
}

void calibrate_machine(const CalibrationOptions& options) {
  fmt::print("calibrating this machine into {} ({} cores)\n", options.out, omp_get_num_procs());
  const double gemm = measure_gemm_gflops(2048, 3) * 1e9;
  const bool native_bf16 = cpu::bf16_gemm_native();
  const double gemm_bf16 = native_bf16 ? measure_bf16_gemm_gflops(2048, 3) * 1e9 : gemm;
  fmt::print("  sgemm 2048^3 on all cores      {:8.1f} GFLOP/s\n", gemm / 1e9);
  fmt::print("  bf16 gemm 2048^3               {:8.1f} GFLOP/s ({})\n", gemm_bf16 / 1e9,
             native_bf16 ? "native" : "widened to fp32");
  const double copy = measure_copy_bandwidth();
  fmt::print("  parallel copy                  {:8.1f} GB/s\n", copy / 1e9);
  const CommCalibration comm = run_comm_bench(options);
  fmt::print("  MPI all-reduce, {} ranks        {:8.1f} us (8 B), {:.2f} GB/s bus bandwidth\n",
             comm.ranks, comm.latency_us, comm.bandwidth_gbs);
  const HostRates host = calibrate_host_rates();
  fmt::print("  host AdamW / accumulate        {:8.3g} / {:.3g} elements/s, copy {:.1f} GB/s\n",
             host.adamw_params_per_s, host.accumulate_params_per_s, host.copy_bytes_per_s / 1e9);

  HardwareProfile hw;
  hw.path = options.out;
  hw.name = "this machine (calibrated)";
  hw.device.memory = fmt::format("{}B", memory_available_bytes());
  hw.device.peak_tflops_fp32 = gemm / 1e12;
  hw.device.peak_tflops_bf16 = gemm_bf16 / 1e12;
  hw.device.sustained_fraction = 1.0;
  hw.device.memory_bandwidth_gbs = copy / 1e9;
  hw.device.shared_by_node = true;
  hw.device.compute_units = omp_get_num_procs();
  hw.node.devices_per_node = 64;
  hw.intra_node = hw.inter_node = {comm.bandwidth_gbs, comm.alpha_us};
  hw.collective = {CollectiveLibrary::mpi, 0.0, false};
  hw.host = {host.adamw_params_per_s, host.accumulate_params_per_s};
  hw.pcie = {host.copy_bytes_per_s / 1e9, 0.0};

  // The sustained fraction: a real 1-rank run against the model at the peak.
  Config config = config_load(options.config, {});
  const StepPrediction at_peak = throughput_predict(config, 1, hw);
  const double measured = measure_step_seconds(options.config, {}, 1, options.measure);
  const double sustained = std::clamp(
      at_peak.compute_seconds / std::max(measured - at_peak.optimizer_seconds, 1e-9), 0.01, 1.0);
  fmt::print(
      "  {} at 1 rank: {:.1f} ms/step measured, {:.1f} ms of compute at the sgemm rate -> "
      "sustained fraction {:.3f}\n",
      options.config, measured * 1e3, at_peak.compute_seconds * 1e3, sustained);

  std::filesystem::path out(options.out);
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  std::ofstream file(out);
  LLM_CHECK(file, "cannot write {}", options.out);
  file << fmt::format(
      R"toml(# This machine, measured by `./train scale --calibrate` on {date} ({cores} cores);
# rerun it to refresh every number below. Ranks share the machine: compute,
# memory and bandwidth are the node's, divided among the ranks on it.
name = "CPU development machine ({cores} cores, calibrated {date})"

[device]
memory = "{memory}"  # bytes available (MemAvailable) when calibrated
reserved_memory = "0"
peak_tflops_bf16 = {peak_bf16:.6f}  # bf16 gemm 2048^3 on all cores ({gemm_bf16:.1f} GFLOP/s, {bf16_path})
peak_tflops_fp32 = {peak:.6f}  # sgemm 2048^3 on all cores ({gemm:.1f} GFLOP/s)
sustained_fraction = {sustained:.4f}  # {config} at 1 rank: {measured:.1f} ms/step measured vs {compute:.1f} ms of modeled compute at the peak (+ {optimizer:.1f} ms optimizer)
memory_bandwidth_gbs = {copy:.2f}  # parallel copy of 256 MiB, read + write bytes per second
shared_by_node = true
compute_units = {cores}  # cores (omp_get_num_procs); an MPI collective is driven by its rank's own process
rate_dispersion = 0.0  # the ranks share these cores: no spread between devices

[node]
devices_per_node = 64  # every rank of a run here is on this one machine

[intra_node]
bandwidth_gbs = {bw:.4f}  # MPI all-reduce of 64 MiB between {ranks} local ranks: ring bytes / (time - latency)
latency_us = {alpha:.3f}  # 8-byte all-reduce ({latency:.1f} us) over its 2(n-1) ring steps

[inter_node]  # unused (one node); the same numbers
bandwidth_gbs = {bw:.4f}
latency_us = {alpha:.3f}

[collective]
library = "mpi"  # one ring with the latency and bandwidth measured above
base_latency_us = 0.0  # folded into the per-step latency above
async_progress = false  # Open MPI's nonblocking collectives progress only inside MPI calls, i.e. when waited on

[host]  # the offloaded optimizer's host side: here the same cores and memory as the "device"
adamw_params_per_s = {adamw:.4g}  # our adamw_update (with the bf16 copy) over 64 Mi elements on all cores
accumulate_params_per_s = {accumulate:.4g}  # sum += gradient over 64 Mi elements on all cores

[pcie]  # the CPU backend's host <-> device copy is a memcpy
bandwidth_gbs = {copy_gbs:.3f}  # host_memory().to_device of 256 MiB (one thread), bytes per second
latency_us = 0.0  # a memcpy has no launch cost worth modelling
)toml",
      fmt::arg("date", today()), fmt::arg("cores", omp_get_num_procs()),
      fmt::arg("memory", memory_available_bytes()), fmt::arg("peak", gemm / 1e12),
      fmt::arg("gemm", gemm / 1e9), fmt::arg("peak_bf16", gemm_bf16 / 1e12),
      fmt::arg("gemm_bf16", gemm_bf16 / 1e9),
      fmt::arg("bf16_path", native_bf16 ? "native" : "widened to fp32"),
      fmt::arg("sustained", sustained), fmt::arg("config", options.config),
      fmt::arg("measured", measured * 1e3), fmt::arg("compute", at_peak.compute_seconds * 1e3),
      fmt::arg("optimizer", at_peak.optimizer_seconds * 1e3), fmt::arg("copy", copy / 1e9),
      fmt::arg("bw", comm.bandwidth_gbs), fmt::arg("ranks", comm.ranks),
      fmt::arg("alpha", comm.alpha_us), fmt::arg("latency", comm.latency_us),
      fmt::arg("adamw", host.adamw_params_per_s),
      fmt::arg("accumulate", host.accumulate_params_per_s),
      fmt::arg("copy_gbs", host.copy_bytes_per_s / 1e9));
  fmt::print("wrote {}\n", options.out);
}

}  // namespace llm
