// The world as the trainer's collectives see it on a GPU: NCCL over device
// buffers (parallel.comm = nccl), or MPI staged through host memory; on
// the CPU, the world as it is.
#pragma once

#include <memory>

#include "collectives/group.h"
#include "schema/config.h"

namespace llm {

// On a GPU: sets up this rank's device (model/device_setup.h) and returns
// the world wrapped for device buffers; on the CPU, null (use `world`).
std::unique_ptr<Group> device_group(const Config& config, Group& world);

}  // namespace llm
