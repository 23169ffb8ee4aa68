// cuDNN's fused flash attention for bf16 storage: the contract of
// llm::cuda::attention_forward / attention_backward (model/kernels/attention.h)
// on the same device buffers, so the backend's bf16 table can hold either.
// Built only with the CUDA backend and cuDNN (CMake's LLM_HAVE_CUDNN);
// attention_fallback_calls is 0 in every other build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/storage_types.h"

namespace llm::cudnn {

// With doc_start (document masking) both run the flash kernel, saying so once:
// the graphs here express causal masks only.
void attention_forward(Bf16* out, float* lse, const Bf16* qkv, const int32_t* doc_start, int B,
                       int T, int H, int KV, int D);
void attention_backward(Bf16* dqkv, const Bf16* dout, const Bf16* qkv, const Bf16* out,
                        const float* lse, const int32_t* doc_start, int B, int T, int H, int KV,
                        int D);

// Calls of either entry point that ran the flash kernel instead because cuDNN
// refused the shape, the pointers or a document mask (tests assert cuDNN
// really ran).
size_t attention_fallback_calls();

// cuDNN's version and, a line each, every shape's plan built so far: the
// engine cuDNN's heuristics chose (its plan name) and the workspace bytes,
// or that it refused the shape. Empty in a build without cuDNN.
std::string attention_plans();

}  // namespace llm::cudnn
