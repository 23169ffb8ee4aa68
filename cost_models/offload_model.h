// Predicted step time of an offloaded optimizer next to the device-only step:
// no offload, ZeRO-Offload (with and without offload.delayed_update) and
// ZenFlow (the config's zenflow.topk_ratio, update_interval, overlap_step),
// with the parts: host AdamW, PCIe each way, host time the device waits for,
// GPU idle time. Per rank, per step, in the steady state.
//
// The recurrences behind every part (the notation, the copies' and the
// host worker's timelines per unit, each variant's step time, what is not
// modeled) are written out in docs/throughput_model.md, "The offload
// model's recurrences".
// Invariant: every part follows from those per-unit recurrences, so each
// can be checked by hand (test_throughput_model.cpp does).
#pragma once

#include <vector>

#include "schema/config.h"
#include "cost_models/hardware_profile.h"
#include "cost_models/throughput_model.h"

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
