// The CPU backend's op table: the hand-written kernels of model/kernels/*.cpp.
#include "model/backend.h"

namespace llm {

const Backend& backend_cpu() {
  static const Backend backend{
      Device::cpu,
      cpu::embedding_forward,
      cpu::embedding_backward,
      cpu::rmsnorm_forward,
      cpu::rmsnorm_backward,
      cpu::rope_table,
      cpu::rope_forward,
      cpu::rope_backward,
      cpu::attention_forward,
      cpu::attention_backward,
      cpu::swiglu_forward,
      cpu::swiglu_backward,
      cpu::matmul_forward,
      cpu::matmul_backward,
      cpu::residual_forward,
      cpu::cross_entropy_forward,
      cpu::cross_entropy_forward_backward,
      cpu::fill_zero,
      cpu::adamw_update,
      cpu::sum_squares,
  };
  return backend;
}

}  // namespace llm
