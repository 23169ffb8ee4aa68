// The CUDA backend's op table: the hand-written kernels of
// model/kernels/*.cu (matmuls through cuBLASLt), each with the signature of
// its CPU twin, which the table's decltype types check.
#include "model/backend.h"

namespace llm {

const Backend& backend_cuda() {
  static const Backend backend{
      Device::cuda,
      &cuda_memory(),
      cuda::embedding_forward,
      cuda::embedding_forward_bf16,
      cuda::embedding_backward,
      cuda::embedding_backward_bf16,
      cuda::rmsnorm_forward,
      cuda::rmsnorm_forward_bf16,
      cuda::rmsnorm_backward,
      cuda::rmsnorm_backward_bf16,
      cuda::rope_table,
      cuda::rope_forward,
      cuda::rope_forward_bf16,
      cuda::rope_backward,
      cuda::rope_backward_bf16,
      cuda::attention_forward,
      cuda::attention_forward_bf16,
      cuda::attention_backward,
      cuda::attention_backward_bf16,
      cuda::swiglu_forward,
      cuda::swiglu_forward_bf16,
      cuda::swiglu_backward,
      cuda::swiglu_backward_bf16,
      cuda::matmul_forward,
      cuda::matmul_forward_bf16,
      cuda::matmul_backward,
      cuda::matmul_backward_bf16,
      cuda::residual_forward,
      cuda::residual_forward_bf16,
      cuda::cross_entropy_forward,
      cuda::cross_entropy_forward_bf16,
      cuda::cross_entropy_forward_backward,
      cuda::cross_entropy_forward_backward_bf16,
      cuda::fill_zero,
      cuda::fill_zero_bf16,
      cuda::cast_f32_to_bf16,
      cuda::cast_bf16_to_f32,
      cuda::adamw_update,
      cuda::sum_squares,
  };
  return backend;
}

}  // namespace llm
