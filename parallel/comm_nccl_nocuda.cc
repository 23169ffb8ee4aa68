// CPU-only build: there is no NCCL, and asking for an NCCL group says why.
// Compiled only when CUDA is off (parallel/comm_nccl.cu otherwise).
#include "base/error.h"
#include "parallel/comm_nccl.h"

namespace llm {

std::unique_ptr<Group> make_nccl_group(Group&) {
  LLM_FAIL(
      "make_nccl_group: this build has no CUDA/NCCL backend (nvcc was not found at configure "
      "time)");
}

}  // namespace llm
