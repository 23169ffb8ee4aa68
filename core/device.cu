// CUDA build: asks the runtime how many devices this process can use. A
// machine without a driver or GPU answers zero rather than failing.
#include <cuda_runtime.h>

#include "core/device.h"

namespace llm {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a machine without a GPU
    return 0;
  }
  return count;
}

}  // namespace llm
