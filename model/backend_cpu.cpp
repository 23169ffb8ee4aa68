// The CPU backend's op tables: the hand-written kernels of model/kernels/*.cpp,
// filled by name (never by position).
#include "model/backend.h"

namespace llm {

namespace {

// Every op of LLM_TYPED_OPS, instantiated for storage type T.
template <class T>
TypedOps<T> cpu_typed_ops() {
  TypedOps<T> table{};
#define LLM_SET_CPU_OP(name) table.name = &cpu::name<T>;
  LLM_TYPED_OPS(LLM_SET_CPU_OP)
#undef LLM_SET_CPU_OP
  return table;
}

}  // namespace

const Backend& backend_cpu() {
  static const Backend backend{
      .device = Device::cpu,
      .memory = &host_memory(),
      .f32 = cpu_typed_ops<float>(),
      .bf16 = cpu_typed_ops<Bf16>(),
      .rope_table = cpu::rope_table,
      .cast_f32_to_bf16 = cpu::cast_f32_to_bf16,
      .cast_bf16_to_f32 = cpu::cast_bf16_to_f32,
      .adamw_update = cpu::adamw_update,
      .sum_squares = cpu::sum_squares,
      .column_sum_squares = cpu::column_sum_squares,
      .gather_columns = cpu::gather_columns,
  };
  return backend;
}

}  // namespace llm
