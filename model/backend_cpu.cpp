// The CPU backend's op table: the hand-written kernels of model/kernels/*.cpp.
#include "model/backend.h"

namespace llm {

const Backend& backend_cpu() {
  static const Backend backend{
      Device::cpu,
      &host_memory(),
      cpu::embedding_forward,
      cpu::embedding_forward_bf16,
      cpu::embedding_backward,
      cpu::embedding_backward_bf16,
      cpu::rmsnorm_forward,
      cpu::rmsnorm_forward_bf16,
      cpu::rmsnorm_backward,
      cpu::rmsnorm_backward_bf16,
      cpu::rope_table,
      cpu::rope_forward,
      cpu::rope_forward_bf16,
      cpu::rope_backward,
      cpu::rope_backward_bf16,
      cpu::attention_forward,
      cpu::attention_forward_bf16,
      cpu::attention_backward,
      cpu::attention_backward_bf16,
      cpu::swiglu_forward,
      cpu::swiglu_forward_bf16,
      cpu::swiglu_backward,
      cpu::swiglu_backward_bf16,
      cpu::matmul_forward,
      cpu::matmul_forward_bf16,
      cpu::matmul_backward,
      cpu::matmul_backward_bf16,
      cpu::residual_forward,
      cpu::residual_forward_bf16,
      cpu::cross_entropy_forward,
      cpu::cross_entropy_forward_bf16,
      cpu::cross_entropy_forward_backward,
      cpu::cross_entropy_forward_backward_bf16,
      cpu::fill_zero,
      cpu::fill_zero_bf16,
      cpu::cast_f32_to_bf16,
      cpu::cast_bf16_to_f32,
      cpu::adamw_update,
      cpu::sum_squares,
  };
  return backend;
}

}  // namespace llm
