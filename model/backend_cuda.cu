// The CUDA backend's op tables: the hand-written kernels of
// model/kernels/*.cu (matmuls through cuBLASLt), filled by name (never by
// position); each field's type is that of the CPU twin, so a launcher with
// another signature does not compile. The one choice among kernels is bf16
// attention: cuDNN's fused attention (model/cudnn/) or the flash kernel, one
// table each.
#include "model/backend.h"
#include "model/cudnn/attention_cudnn.h"
#include "device/device_graphs.h"

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

// bf16 ops with attention by cuDNN when `with_cudnn` (only in a cuDNN build).
TypedOps<Bf16> cuda_bf16_ops(bool with_cudnn) {
  TypedOps<Bf16> table = cuda_typed_ops<Bf16>();
#ifdef LLM_WITH_CUDNN
  if (with_cudnn) {
    table.attention_forward = &cudnn::attention_forward;
    table.attention_backward = &cudnn::attention_backward;
  }
#else
  (void)with_cudnn;
#endif
  return table;
}

Backend cuda_backend(bool with_cudnn) {
  Backend backend{};
  backend.device = Device::cuda;
  backend.memory = &cuda_memory();
  backend.graphs = &cuda_device_graphs();
  backend.f32 = cuda_typed_ops<float>();
  backend.bf16 = cuda_bf16_ops(with_cudnn);
#define LLM_SET_CUDA_NAMED_OP(name) backend.name = &cuda::name;
  LLM_NAMED_OPS(LLM_SET_CUDA_NAMED_OP)
#undef LLM_SET_CUDA_NAMED_OP
  return backend;
}

}  // namespace

#ifndef LLM_WITH_CUDNN
// Without cuDNN nothing falls back (model/cudnn/attention_cudnn.cpp counts them).
size_t cudnn::attention_fallback_calls() { return 0; }
std::string cudnn::attention_plans() { return {}; }
#endif

// In a build without cuDNN every choice is the flash kernel (the trainer
// refuses training.attention = cudnn there, naming the key).
const Backend& backend_cuda(AttentionKernel attention) {
  if (attention == AttentionKernel::flash || !kBuiltWithCudnn) {
    static const Backend flash = cuda_backend(false);
    return flash;
  }
  static const Backend cudnn = cuda_backend(true);
  return cudnn;
}

}  // namespace llm
