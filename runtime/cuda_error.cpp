// The thrower behind LLM_CUDA_CHECK (core/cuda_runtime.cuh), kept in a C++
// source so CUDA sources never compile the formatting library.
#include "runtime/error.h"

namespace llm::cuda {

[[noreturn]] void throw_cuda_error(const char* call, const char* error, const char* file,
                                   int line) {
  throw_error(file, line, fmt::format("CUDA error: {} failed: {}", call, error));
}

}  // namespace llm::cuda
