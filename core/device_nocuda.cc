// CPU-only build: there are no CUDA devices. Compiled only when CUDA is off.
#include "core/device.h"

namespace llm {

int cuda_device_count() { return 0; }

}  // namespace llm
