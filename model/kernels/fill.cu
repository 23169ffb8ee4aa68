// CUDA twin of fill_zero: a memset queued on the compute stream.
// Invariant: all-zero bits are +0 in both fp32 and bf16, so a byte memset is
// the fill; it is ordered with the kernels around it and never blocks the host.
#include "device/cuda_runtime.cuh"
#include "model/kernels/fill.h"

namespace llm::cuda {

template <class T>
void fill_zero(T* x, size_t n) {
  if (n == 0) return;
  LLM_CUDA_CHECK(cudaMemsetAsync(x, 0, n * sizeof(T), compute_stream()));
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(fill_zero);

}  // namespace llm::cuda
