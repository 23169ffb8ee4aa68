// The small backend interface: the op entry points of one device. Model code
// calls ops only through a Backend, so it never contains #ifdef CUDA.
// Ops that exist for both storage types are listed once in LLM_TYPED_OPS and
// live in one table per storage type (TypedOps<float>, TypedOps<Bf16>); each
// field has the type of the CPU twin's instantiation and is filled by name from
// the same list (cpu_typed_ops, cuda_typed_ops), so a CUDA launcher with another
// signature does not compile and two ops of one signature (rope_forward,
// rope_backward) cannot be swapped. The ops with no storage-type variant are
// named fields, filled by designated initializers.
// Every pointer an op takes lives in the backend's `memory` (host memory for
// the CPU); ops are queued in order on the device and never synchronize with
// the host (sum_squares too writes its result into that memory).
#pragma once

#include <type_traits>

#include "device/device.h"
#include "device/device_graphs.h"
#include "base/storage_types.h"
#include "model/kernels/adamw.h"
#include "model/kernels/attention.h"
#include "model/kernels/cast.h"
#include "model/kernels/columns.h"
#include "model/kernels/cross_entropy.h"
#include "model/kernels/embedding.h"
#include "model/kernels/kv_cache.h"
#include "model/kernels/fill.h"
#include "model/kernels/fp8_matmul.h"
#include "model/kernels/matmul.h"
#include "model/kernels/qk_norm.h"
#include "model/kernels/residual.h"
#include "model/kernels/rmsnorm.h"
#include "model/kernels/rope.h"
#include "model/kernels/row_bias.h"
#include "model/kernels/swiglu.h"

namespace llm {

// The ops templated over the storage type T, each declared in llm::cpu and
// llm::cuda as `template <class T> void name(...)`. Adding one: its kernels
// header, .cpp and .cu, and one line here.
#define LLM_TYPED_OPS(X)     \
  X(embedding_forward)       \
  X(embedding_backward)      \
  X(rmsnorm_forward)         \
  X(rmsnorm_forward_fp8)     \
  X(rmsnorm_backward)        \
  X(qk_norm_forward)         \
  X(qk_norm_backward)        \
  X(row_bias_forward)        \
  X(row_bias_backward)       \
  X(rope_forward)            \
  X(rope_backward)           \
  X(attention_forward)       \
  X(attention_backward)      \
  X(kv_cache_write)          \
  X(attention_cached)        \
  X(swiglu_forward)          \
  X(swiglu_forward_fp8)      \
  X(swiglu_backward)         \
  X(matmul_forward)          \
  X(matmul_forward_residual) \
  X(matmul_backward)         \
  X(fp8_gemm)                \
  X(add_vectors)             \
  X(cross_entropy_partials)  \
  X(cross_entropy_combine)   \
  X(fill_zero)               \
  X(scatter_columns)

// The ops with one signature, each declared in llm::cpu and llm::cuda as a
// plain function. Adding one: its kernels header, .cpp and .cu, and one line here.
#define LLM_NAMED_OPS(X)     \
  X(rope_table)              \
  X(cast_f32_to_bf16)        \
  X(cast_bf16_to_f32)        \
  X(adamw_update)            \
  X(sum_squares)             \
  X(column_sum_squares)      \
  X(gather_columns)          \
  X(fp8_amax_scale)          \
  X(fp8_scale_from_row_amax) \
  X(fp8_cast_transpose)      \
  X(fp8_cast_amax)           \
  X(fp8_amax_fold)

// The typed ops of one storage type T (float or Bf16).
template <class T>
struct TypedOps {
#define LLM_TYPED_OP_FIELD(name) decltype(&cpu::name<T>) name;
  LLM_TYPED_OPS(LLM_TYPED_OP_FIELD)
#undef LLM_TYPED_OP_FIELD
};

struct Backend {
  Device device;
  const DeviceMemory* memory;
  // Capture and replay of device work (training.cuda_graphs); null: every
  // op launches eagerly (the CPU, and a profiled backend, whose timing
  // events cannot be read inside a graph).
  const DeviceGraphs* graphs = nullptr;
  TypedOps<float> f32;
  TypedOps<Bf16> bf16;
#define LLM_NAMED_OP_FIELD(name) decltype(&cpu::name) name;
  LLM_NAMED_OPS(LLM_NAMED_OP_FIELD)
#undef LLM_NAMED_OP_FIELD

  // The table of storage type T: f32 or bf16.
  template <class T>
  const TypedOps<T>& ops() const {
    if constexpr (std::is_same_v<T, Bf16>)
      return bf16;
    else
      return f32;
  }
};

const Backend& backend_cpu();
// The CUDA kernels of model/kernels/*.cu (throws in a build without CUDA),
// with bf16 attention by `attention` (device/device.h): cuDNN's fused
// attention (model/cudnn/) or the hand-written flash kernel.
const Backend& backend_cuda(AttentionKernel attention = AttentionKernel::automatic);
inline const Backend& backend_for(Device device,
                                  AttentionKernel attention = AttentionKernel::automatic) {
  return device == Device::cuda ? backend_cuda(attention) : backend_cpu();
}

}  // namespace llm
