// Predicted step time of an offloaded optimizer next to the device-only step:
// no offload, ZeRO-Offload (with and without offload.delayed_update) and
// ZenFlow (the config's zenflow.topk_ratio, update_interval, overlap_step),
// with the parts: host AdamW, PCIe each way, host time the device waits for,
// GPU idle time. Per rank, per step, in the steady state.
//
// Notation (per rank): s_u the elements of unit u the rank owns (the engine's
// ceil(n_u / S) over its shard group of S; the whole unit for ddp), s = sum
// s_u; P the PCIe bandwidth per direction and L its latency per copy (the
// profile's [pcie]); R_a, R_c the host's AdamW and accumulate rates ([host],
// the node's divided among its ranks); c the compute copy's bytes per element
// (2 in bf16, 4 in fp32); k = zenflow.topk_ratio; U = zenflow.update_interval
// ("auto" is modeled as its starting value, DeepSpeed's default 4); R the
// steps between choices (select_interval; auto = U).
//  - none: throughput_predict of the config without offload: step T0 and its
//    optimizer part O (device AdamW, gradient norm, compute-copy refresh).
//  - F: throughput_predict of the config with offload.optimizer = cpu (not
//    delayed, no ZenFlow) less its optimizer part: forward, backward and
//    exposed communication as the engine runs them with the masters on the
//    host (zero1 / zero2 all-gather the compute copy after the update either
//    way, so F = T0 - O as long as the traces agree). F is also the window
//    the host's work can hide behind.
//  - copies: down_u = L + 4 s_u / P (the reduced fp32 gradient to the host),
//    up_u(x) = L + c x s_u / P (a fraction x of the compute copy back; 0 when
//    x = 0).
//  - pipe(a, b): unit u's gradient lands on the host at A_u = a_0 + ... + a_u
//    (copies back to back), the host worker takes units in order: B_u =
//    max(A_u, B_{u-1}) + b_u; pipe = B_last. So max(sum a, sum b) <= pipe <=
//    sum a + sum b.
//  - offload: T = F + pipe(down, s_u / R_a) + sum up(1). The device's
//    optimizer step O is gone; the uploads follow the last update
//    (HostOptimizer::step: wait for the worker, then publish every unit).
//  - offload + delayed_update: T = F + sum down + sum up(1) + max(0, pipe(down,
//    s_u / R_a) - sum down - F): step N's updates run while step N + 1
//    computes; step N + 1's optimizer phase waits for what is left, uploads
//    step N's compute copy and sends its own gradient.
//  - zenflow: device work D = k O + (4 + 14 k) s / B_mem + allreduce(4
//    bytes x every matrix column, shard group) / R: AdamW on the top-k
//    elements, the column norms read the gradient (4 B), the chosen columns'
//    gradient gathered (read 4, write 4) and their compute copy scattered
//    (read 4, write 2), and every R steps one buffer of column norms
//    all-reduced (ZenFlow::column_norm_offsets).
//    Every step the whole gradient comes down and is added to the host's
//    accumulator; every U-th step the host runs AdamW over its whole owned
//    slice (the chosen columns' results are discarded: the device's state
//    replaces them) and sends the whole compute copy up (ZenFlow: the chosen
//    columns are scattered over it again on the device):
//      ordinary step  T_o = F + D + path(down, s_u / R_c, 0)
//      update step    T_u = F + D + path(down, s_u / R_c + s_u / R_a, up(1))
//    with path(a, b, up) = pipe(a, b) + sum up without overlap_step, and
//    sum a + sum up + max(0, pipe(a, b) - sum a - F) with it (the host work
//    of step N hides behind step N + 1's forward and backward; the upload
//    is on the critical path). T = ((U - 1) T_o + T_u) / U, and each part is
//    averaged the same way.
//  - exposed host = the path less its copies (pipe - sum down, or what the
//    window did not hide); host stall = copies + exposed host (the host
//    path's time on the critical path; 0 without offload); GPU idle = T -
//    compute - device optimizer work (O, 0, 0, D): the time the device waits
//    for the network, PCIe or host.
//  - PCIe bytes per step: offload (4 + c) s; zenflow 4 s + c s / U.
// Not modeled: ZenFlow's warm-up rounds and the copies of the chosen columns'
// state at a new choice (beyond the norm all-reduce), contention between the ranks' copies and
// the host AdamW for host memory, the device's gradient norm under offload.
// Invariant: every part is a sum over the rank's units of the quantities
// above, so each can be checked by hand (test_throughput_model.cpp does).
#pragma once

#include <vector>

#include "config/config.h"
#include "planning/hardware_profile.h"
#include "planning/throughput_model.h"

namespace llm {

enum class OffloadMode { none, offload, offload_delayed, zenflow };
inline constexpr OffloadMode kOffloadModes[] = {OffloadMode::none, OffloadMode::offload,
                                                 OffloadMode::offload_delayed, OffloadMode::zenflow};
const char* offload_mode_name(OffloadMode mode);
// The mode a config trains in (offload.optimizer, delayed_update, zenflow.enabled).
OffloadMode offload_mode_of(const Config& config);

struct OffloadModePrediction {
  double step_seconds = 0;
  double device_optimizer_seconds = 0;  // optimizer work left on the device
  double host_adamw_seconds = 0;        // per step (ZenFlow: its update / U)
  double host_accumulate_seconds = 0;   // ZenFlow: gradient into the host accumulator
  double to_host_seconds = 0;           // PCIe device -> host
  double to_device_seconds = 0;         // PCIe host -> device
  double exposed_host_seconds = 0;      // host work the step waits for
  double host_stall_seconds = 0;        // PCIe both ways + exposed host
  double gpu_idle_seconds = 0;          // step - compute - device optimizer work
  double pcie_bytes = 0;                // both directions
};

struct OffloadPrediction {
  StepPrediction device;                // throughput_predict without offload
  StepPrediction offloaded;             // throughput_predict with offload.optimizer = cpu
  double forward_backward_seconds = 0;  // F = offloaded.step - offloaded.optimizer
  int update_interval = 0;              // ZenFlow's U as modeled
  OffloadModePrediction modes[4];       // indexed by OffloadMode

  const OffloadModePrediction& operator[](OffloadMode mode) const {
    return modes[static_cast<int>(mode)];
  }
};

OffloadPrediction offload_predict(const Config& config, int world, const HardwareProfile& hardware);

// pipe(copy, work) above: the end of the last unit's host work when unit u's
// data lands after copy[0] + ... + copy[u] and the host takes units in order.
double offload_pipeline_seconds(const std::vector<double>& copy, const std::vector<double>& work);

}  // namespace llm
