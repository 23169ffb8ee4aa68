// CPU-only build: there is no CUDA op table; asking for one says why.
#include "base/error.h"
#include "model/backend.h"
#include "model/cudnn/attention_cudnn.h"

namespace llm {

const Backend& backend_cuda(AttentionKernel) {
  LLM_FAIL("this build has no CUDA backend (nvcc was not found at configure time)");
}

size_t cudnn::attention_fallback_calls() { return 0; }  // no cuDNN, no fallbacks
std::string cudnn::attention_plans() { return {}; }

}  // namespace llm
