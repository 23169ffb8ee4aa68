// The throwers behind LLM_CUDA_CHECK and NCCL's checks (device/cuda_runtime.cuh), kept in a C++
// source so CUDA sources never compile the formatting library.
#include "base/error.h"
#include "base/exit_status.h"

namespace llm::cuda {

[[noreturn]] void throw_cuda_error(const char* call, const char* error, const char* file,
                                   int line) {
  throw_error(file, line, fmt::format("CUDA error: {} failed: {}", call, error));
}

[[noreturn]] void throw_restartable_cuda_error(const char* call, const char* error,
                                               const char* file, int line) {
  throw RestartableError(fmt::format("CUDA error: {} failed: {}", call, error),
                         fmt::format("{}:{}", file, line));
}

[[noreturn]] void throw_nccl_failure(const char* what, const char* error, bool restartable,
                                     const char* file, int line) {
  std::string message = fmt::format("NCCL error: {} failed: {}", what, error);
  std::string location = fmt::format("{}:{}", file, line);
  if (restartable) throw RestartableError(message, location);
  throw Error(message, location);
}

}  // namespace llm::cuda
