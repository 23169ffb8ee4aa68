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

// Every op of LLM_NAMED_OPS.
Backend cpu_backend() {
  Backend backend{};
  backend.device = Device::cpu;
  backend.memory = &host_memory();
  backend.f32 = cpu_typed_ops<float>();
  backend.bf16 = cpu_typed_ops<Bf16>();
#define LLM_SET_CPU_NAMED_OP(name) backend.name = &cpu::name;
  LLM_NAMED_OPS(LLM_SET_CPU_NAMED_OP)
#undef LLM_SET_CPU_NAMED_OP
  return backend;
}

}  // namespace

const Backend& backend_cpu() {
  static const Backend backend = cpu_backend();
  return backend;
}

}  // namespace llm
