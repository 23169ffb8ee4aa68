// The small backend interface: one table of op entry points per device. Model
// code calls ops only through a Backend, so it never contains #ifdef CUDA; a
// CUDA backend fills the same table with launchers of identical signatures
// (decltype of the CPU twin), which the compiler checks. Each op with bf16
// storage has a `_bf16` entry right after its fp32 one. Every pointer an op
// takes lives in the backend's `memory` (host memory for the CPU); ops are
// queued in order on the device and never synchronize with the host, except
// sum_squares, which returns its value.
#pragma once

#include "runtime/device.h"
#include "model/kernels/adamw.h"
#include "model/kernels/attention.h"
#include "model/kernels/cast.h"
#include "model/kernels/cross_entropy.h"
#include "model/kernels/embedding.h"
#include "model/kernels/fill.h"
#include "model/kernels/matmul.h"
#include "model/kernels/residual.h"
#include "model/kernels/rmsnorm.h"
#include "model/kernels/rope.h"
#include "model/kernels/swiglu.h"

namespace llm {

struct Backend {
  Device device;
  const DeviceMemory* memory;
  decltype(&cpu::embedding_forward) embedding_forward;
  decltype(&cpu::embedding_forward_bf16) embedding_forward_bf16;
  decltype(&cpu::embedding_backward) embedding_backward;
  decltype(&cpu::embedding_backward_bf16) embedding_backward_bf16;
  decltype(&cpu::rmsnorm_forward) rmsnorm_forward;
  decltype(&cpu::rmsnorm_forward_bf16) rmsnorm_forward_bf16;
  decltype(&cpu::rmsnorm_backward) rmsnorm_backward;
  decltype(&cpu::rmsnorm_backward_bf16) rmsnorm_backward_bf16;
  decltype(&cpu::rope_table) rope_table;
  decltype(&cpu::rope_forward) rope_forward;
  decltype(&cpu::rope_forward_bf16) rope_forward_bf16;
  decltype(&cpu::rope_backward) rope_backward;
  decltype(&cpu::rope_backward_bf16) rope_backward_bf16;
  decltype(&cpu::attention_forward) attention_forward;
  decltype(&cpu::attention_forward_bf16) attention_forward_bf16;
  decltype(&cpu::attention_backward) attention_backward;
  decltype(&cpu::attention_backward_bf16) attention_backward_bf16;
  decltype(&cpu::swiglu_forward) swiglu_forward;
  decltype(&cpu::swiglu_forward_bf16) swiglu_forward_bf16;
  decltype(&cpu::swiglu_backward) swiglu_backward;
  decltype(&cpu::swiglu_backward_bf16) swiglu_backward_bf16;
  decltype(&cpu::matmul_forward) matmul_forward;
  decltype(&cpu::matmul_forward_bf16) matmul_forward_bf16;
  decltype(&cpu::matmul_backward) matmul_backward;
  decltype(&cpu::matmul_backward_bf16) matmul_backward_bf16;
  decltype(&cpu::residual_forward) residual_forward;
  decltype(&cpu::residual_forward_bf16) residual_forward_bf16;
  decltype(&cpu::cross_entropy_forward) cross_entropy_forward;
  decltype(&cpu::cross_entropy_forward_bf16) cross_entropy_forward_bf16;
  decltype(&cpu::cross_entropy_forward_backward) cross_entropy_forward_backward;
  decltype(&cpu::cross_entropy_forward_backward_bf16) cross_entropy_forward_backward_bf16;
  decltype(&cpu::fill_zero) fill_zero;
  decltype(&cpu::fill_zero_bf16) fill_zero_bf16;
  decltype(&cpu::cast_f32_to_bf16) cast_f32_to_bf16;
  decltype(&cpu::cast_bf16_to_f32) cast_bf16_to_f32;
  decltype(&cpu::adamw_update) adamw_update;
  decltype(&cpu::sum_squares) sum_squares;
};

const Backend& backend_cpu();
// The CUDA kernels of model/kernels/*.cu (throws in a build without CUDA).
const Backend& backend_cuda();
inline const Backend& backend_for(Device device) {
  return device == Device::cuda ? backend_cuda() : backend_cpu();
}

}  // namespace llm
