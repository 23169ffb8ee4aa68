// A rank's device from its config (see device_setup.h).
#include "model/device_setup.h"

#include <spdlog/spdlog.h>

#include "device/device.h"
#include "base/error.h"

namespace llm {

void device_setup(const Config& config, int local_rank) {
  if (config.device() != Device::cuda) return;
  const int gpus = cuda_device_count();
  LLM_CHECK(gpus > 0, "{}: training.device = cuda but {}", config.path,
            kBuiltWithCuda ? "this machine has no CUDA device" : "this build has no CUDA backend");
  LLM_CHECK(config.training.attention != AttentionKernel::cudnn || kBuiltWithCudnn,
            "{}: training.attention = cudnn, but this build has no cuDNN (configured with "
            "LLM_CUDNN=OFF); use auto or flash",
            config.path);
  if (kCudaEmulated)
    spdlog::warn(
        "training.device = cuda runs on the CUDA emulation: the CUDA kernels run on the "
        "CPU, for testing (neither GPU speed nor GPU numerics); attention {} the flash "
        "kernel (cuDNN is not emulated)",
        config.training.attention == AttentionKernel::automatic ? "= auto resolves to" : "runs");
  cuda_use_device(local_rank % gpus);
  cuda_set_gemm_autotune(config.training.gemm_autotune);
  cuda_set_deterministic(config.training.deterministic);
}

}  // namespace llm
