// `./train scale --calibrate`: measures this machine and writes its hardware
// profile (cost_models/hardware/cpu_dev_vm.toml by default), each number with a comment
// saying how it was measured:
//  - matmul peaks: fp32 and bf16 GEMM 2048^3 on all cores (bf16 natively
//    where the CPU has bf16 dot products, else widened: the fp32 rate);
//  - sustained fraction: a real 1-rank training run of the calibration
//    config, its modeled compute time at the peak over its measured step
//    time less the modeled optimizer time;
//  - memory bandwidth: a parallel copy of 256 MiB;
//  - MPI ring latency and bandwidth: `mpirun -np 2 ./train scale
//    --comm-bench`, all-reduces from 8 B to 64 MiB between local ranks;
//  - the host side of offload: our adamw_update (with the bf16 copy) and a
//    gradient accumulation over 64 Mi elements on all cores, and the CPU
//    backend's host -> device copy (a memcpy) of 256 MiB.
// Invariant: the profile is written only after every measurement succeeded.
#pragma once

#include <string>

#include "commands/measure_run.h"
#include "parallel/comm.h"

namespace llm {

struct CalibrationOptions {
  std::string out = "cost_models/hardware/cpu_dev_vm.toml";
  std::string config = "configs/scale_cpu.toml";
  MeasureOptions measure;
};

void calibrate_machine(const CalibrationOptions& options);

// The host side of a profile, measured on all cores (best of 5 each).
struct HostRates {
  double adamw_params_per_s = 0;       // cpu::adamw_update with the bf16 copy
  double accumulate_params_per_s = 0;  // sum[i] += gradient[i]
  double copy_bytes_per_s = 0;         // host_memory().to_device
};
HostRates calibrate_host_rates();

// Times all-reduces of 8 B to 64 MiB on `world`; rank 0 prints one JSON line
// {"comm_bench": {"ranks", "latency_us", "alpha_us", "bandwidth_gbs"}}:
// latency of an 8-byte all-reduce, per ring step (latency / 2(n-1)), and the
// bus bandwidth: ring bytes of the 64 MiB all-reduce over its time beyond
// that latency.
void comm_bench(Group& world);

}  // namespace llm
