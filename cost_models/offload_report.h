// `./train scale --offload`: the offload model's table for one config on one
// hardware profile (no offload, ZeRO-Offload with and without delayed
// update, ZenFlow; step time and its parts), the ratios between the modes,
// and DeepSpeed's published figures for its ZenFlow scenario (Llama-2-7B on
// 4 x A100) next to them.
// Invariant: it prints what offload_predict returns and nothing else; the
// published figures are quoted, never fed into the model.
#pragma once

#include "schema/config.h"
#include "cost_models/hardware_profile.h"

namespace llm {

void offload_print_table(const Config& config, int world, const HardwareProfile& hardware);

}  // namespace llm
