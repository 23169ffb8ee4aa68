// The world for device buffers (see device_group.h).
#include "parallel/device_group.h"

#include <spdlog/spdlog.h>

#include "model/device_setup.h"
#include "parallel/comm.h"
#include "parallel/comm_nccl.h"
#include "parallel/comm_staged.h"
#include "parallel/nccl_placement.h"
#include "device/device.h"
#include "base/error.h"

namespace llm {

std::unique_ptr<Group> device_group(const Config& config, Group& world) {
  if (config.device() != Device::cuda) return nullptr;
  device_setup(config, comm_local_rank());
  if (config.comm() == CommBackend::nccl) {
    const NcclPlacement placement = nccl_placement(cuda_device_count());
    LLM_CHECK(placement.admitted, "{}: {}", config.path, placement.reason);
    if (placement.shared_gpu && world.rank() == 0) spdlog::warn("{}", placement.reason);
    return make_nccl_group(world);
  }
  return make_staged_group(world, cuda_memory());
}

}  // namespace llm
