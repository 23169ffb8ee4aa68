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
//    up_u = L + c s_u / P (the compute copy back); both on one transfer
//    queue, so the uploads follow every copy down.
//  - r_u: when unit u's gradient became final in the offloaded step's
//    replay (StepPrediction::gradient_final: during the backward for zero2 /
//    zero3 and one-member groups, at the reductions' wait otherwise); units
//    are taken in that landing order, as HostOptimizer::landing_order does.
//  - timeline(w, up, start): the copies down back to back from r_u, A_u =
//    max(r_u, A_{u-1}) + down_u; the host worker from the optimizer phase F
//    in landing order, B_u = max(A_u, B_{u-1}) + w_u with B_{-1} = F; each
//    upload after its unit's work and after every copy down, C_u = max(B_u,
//    C_{u-1}) + up_u with C_{-1} = max(A_last, start). "landed" = max(F,
//    A_last): the host has every gradient.
//  - offload: T = max(F, C_last) of timeline(s_u / R_a, up, F). The device's
//    optimizer step O is gone.
//  - offload + delayed_update: step N's updates run while step N + 1
//    computes; step N + 1's optimizer phase waits for what is left and
//    uploads step N's compute copy: T = landed + exposed + sum up, exposed =
//    max(0, B_last - landed - F), of timeline(s_u / R_a, 0, F).
//  - zenflow: device work D = k O + (4 + 14 k) s / B_mem + allreduce(4
//    bytes x every matrix column, shard group) / R: AdamW on the top-k
//    elements, the column norms read the gradient (4 B), the chosen columns'
//    gradient gathered (read 4, write 4) and their compute copy scattered
//    (read 4, write 2), and every R steps one buffer of column norms
//    all-reduced (ZenFlow::column_norm_offsets); it runs on the device from
//    F while the host works.
//    Every step the whole gradient comes down and is added to the host's
//    accumulator; every U-th step the host runs AdamW over its whole owned
//    slice (the chosen columns' results are discarded: the device's state
//    replaces them) and sends the whole compute copy up (ZenFlow: the chosen
//    columns are scattered over it again on the device). The accumulation
//    is waited for at the next step's optimizer phase, so it hides behind F:
//      ordinary step  T_o = max(F + D, A_last) + max(0, B_last - landed - F)
//                     of timeline(s_u / R_c, 0, F)
//      update step    without overlap_step, T_u = max(F + D, C_last) of
//                     timeline(s_u / R_c + s_u / R_a, up, F + D); with it,
//                     T_u = max(F + D, A_last) + max(0, B_last - landed - F)
//                     + sum up, of timeline(s_u / R_c + s_u / R_a, 0, F).
//    T = ((U - 1) T_o + T_u) / U, and each part is averaged the same way.
//  - exposed host = max(0, B_last - landed) less what the window F hid (the
//    delayed forms): host work after the last gradient landed; host stall =
//    T - F - device optimizer work (the host path's time on the critical
//    path; 0 without offload); GPU idle = T - compute - device optimizer
//    work (O, 0, 0, D): the time the device waits for the network, PCIe or
//    host.
//  - PCIe bytes per step: offload (4 + c) s; zenflow 4 s + c s / U.
// Not modeled: ZenFlow's warm-up rounds and the copies of the chosen columns'
// state at a new choice (beyond the norm all-reduce), contention between the
// ranks' copies and the host AdamW for host memory, copies sharing PCIe with
// the backward's collectives (GPUs without NVLink), the device's gradient
// norm under offload; ZenFlow's update pass (accumulate in landing order,
// then AdamW in unit order) is modeled as one pass in landing order.
// Invariant: every part follows from the per-unit recurrences above, so each
// can be checked by hand (test_throughput_model.cpp does).
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

// One unit of the host path, in landing order: when its gradient became
// final (r), its copy down, its host work, its upload (seconds).
struct HostPathUnit {
  double ready = 0, down = 0, work = 0, up = 0;
};
struct HostTimeline {
  double downs_end = 0;    // A_last (0 without units)
  double work_end = 0;     // B_last (the phase start without units)
  double uploads_end = 0;  // C_last
};
// timeline(w, up, start) above, from the optimizer phase `phase` (F).
HostTimeline offload_host_timeline(const std::vector<HostPathUnit>& units, double phase,
                                   double uploads_after);

}  // namespace llm
