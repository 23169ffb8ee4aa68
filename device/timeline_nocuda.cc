// CPU-only build: there is no CUDA timeline; asking for one says why.
#include "base/error.h"
#include "device/timeline.h"

namespace llm {

std::unique_ptr<Timeline> make_cuda_timeline() {
  LLM_FAIL("this build has no CUDA backend (nvcc was not found at configure time)");
}

}  // namespace llm
