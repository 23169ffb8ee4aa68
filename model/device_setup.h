// A rank's device, set up from its config before anything runs there: on a
// GPU (training.device = cuda), CUDA device local_rank % GPUs made current
// and training's GPU switches set (gemm_autotune, deterministic), after
// checking that the machine and build have what the config asks (a GPU;
// cuDNN for training.attention = cudnn); under the CUDA emulation, a warning
// that says so. Nothing on the CPU. The trainer and `./train bench
// --attention` both start here.
#pragma once

#include "schema/config.h"

namespace llm {

void device_setup(const Config& config, int local_rank);

}  // namespace llm
