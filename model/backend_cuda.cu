// The CUDA backend's op tables: the hand-written kernels of
// model/kernels/*.cu (matmuls through cuBLASLt), filled by name (never by
// position); each field's type is that of the CPU twin, so a launcher with
// another signature does not compile.
#include "model/backend.h"

namespace llm {

namespace {

// Every op of LLM_TYPED_OPS, instantiated for storage type T.
template <class T>
TypedOps<T> cuda_typed_ops() {
  TypedOps<T> table{};
#define LLM_SET_CUDA_OP(name) table.name = &cuda::name<T>;
  LLM_TYPED_OPS(LLM_SET_CUDA_OP)
#undef LLM_SET_CUDA_OP
  return table;
}

}  // namespace

const Backend& backend_cuda() {
  static const Backend backend{
      .device = Device::cuda,
      .memory = &cuda_memory(),
      .f32 = cuda_typed_ops<float>(),
      .bf16 = cuda_typed_ops<Bf16>(),
      .rope_table = cuda::rope_table,
      .cast_f32_to_bf16 = cuda::cast_f32_to_bf16,
      .cast_bf16_to_f32 = cuda::cast_bf16_to_f32,
      .adamw_update = cuda::adamw_update,
      .sum_squares = cuda::sum_squares,
  };
  return backend;
}

}  // namespace llm
