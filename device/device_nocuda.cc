// CPU-only build: there are no CUDA devices, and asking for one says how to
// get it. Compiled only when CUDA is off.
#include "device/device.h"
#include "base/error.h"

namespace llm {

const bool kBuiltWithCuda = false;
const bool kCudaEmulated = false;
const bool kBuiltWithCudnn = false;

int cuda_device_count() { return 0; }

void cuda_use_device(int) {
  LLM_FAIL("this build has no CUDA backend (nvcc was not found at configure time)");
}

void cuda_set_gemm_autotune(bool) {}  // no GEMMs to tune

void cuda_set_deterministic(bool) {}  // no library kernels to choose

size_t cuda_free_bytes() { return 0; }

size_t cuda_used_bytes() { return 0; }

const DeviceMemory& cuda_memory() {
  LLM_FAIL("this build has no CUDA backend (nvcc was not found at configure time)");
}

}  // namespace llm
