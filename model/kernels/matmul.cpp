// Bias-free linear layers on the CPU through gemm (cpu_gemm.h: oneDNN, or
// OpenBLAS in a build without it). fp32 operands, and bf16 operands where the
// CPU multiplies bf16 natively (cpu_gemm.h bf16_gemm_native), go straight to
// one product per call. Elsewhere the Bf16 instantiations widen their operands
// into fp32 scratch (exact), run the fp32 products on them, and round the
// results once; they go through the rows in chunks, so the scratch stays
// bounded (about kChunkFloats floats per operand plus the widened weight)
// however many rows there are: the LM head's logits are never held in fp32.
// Scratch is grow-only and per thread (cpu_scratch.h): no allocation once warmed up.
// Invariant: dweight accumulates (beta = 1), dinp is overwritten (beta = 0);
// the residual forward is the plain forward with beta = 1 onto a copy of the
// residual (in widened bf16: onto its widened rows), so both round once.
#include "model/kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <cstddef>
#include <type_traits>

#include "model/kernels/cast.h"
#include "model/kernels/cpu_scratch.h"
#include "model/kernels/cpu_gemm.h"

namespace llm::cpu {

namespace {

constexpr size_t kChunkFloats = size_t{1} << 22;  // widest chunk operand: 16 MiB of fp32
constexpr int kMinChunkRows = 64;                 // keeps each sgemm large enough to be efficient

// Rows per chunk so that a chunk of rows of C or OC values holds about kChunkFloats.
int chunk_rows(int N, int C, int OC) {
  const int by_size = (int)(kChunkFloats / (size_t)std::max({C, OC, 1}));
  return std::min(N, std::max(kMinChunkRows, by_size));
}

// The fp32 scratch buffers of the bf16 path, one per operand role.
enum ScratchRole { kWeight, kInputRows, kOutputRows, kInputGradRows, kScratchRoles };

struct MatmulScratch;
float* scratch(ScratchRole role, size_t n) {
  return thread_scratch<MatmulScratch, kScratchRoles>(role, n);
}

float* widened(ScratchRole role, const Bf16* x, size_t n) {
  float* wide = scratch(role, n);
  cast_bf16_to_f32(wide, x, n);
  return wide;
}

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + beta * out, one product on T
// operands (fp32, or bf16 where native).
template <class T>
void forward_direct(T* out, const T* inp, const T* weight, int N, int C, int OC, float beta) {
  gemm(GemmArgs<T, T>{Op::kNone, Op::kTranspose, N, OC, C, inp, C, weight, C, beta, out, OC});
}

// dinp (N, C) = dout (N, OC) @ weight (OC, C) unless dinp is null, and
// dweight (OC, C) += dout^T @ inp (N, C), one product each on T operands.
template <class T>
void backward_direct(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC) {
  if (dinp != nullptr)
    gemm(GemmArgs<T, T>{Op::kNone, Op::kNone, N, C, OC, dout, OC, weight, C, 0.0f, dinp, C});
  gemm(GemmArgs<T, float>{Op::kTranspose, Op::kNone, OC, C, N, dout, OC, inp, C, 1.0f, dweight, C});
}

template <class T>
bool direct() {
  return std::is_same_v<T, float> || bf16_gemm_native();
}

// The widened bf16 forward, chunk by chunk of rows: widened operands, one fp32 product
// (onto the widened residual rows when there is a residual), rounded once.
// Each chunk reads its residual rows before writing its output rows, so out
// may be residual.
void forward_widened(Bf16* out, const Bf16* inp, const Bf16* weight, const Bf16* residual, int N,
                     int C, int OC) {
  const float* weight_f32 = widened(kWeight, weight, (size_t)OC * C);
  const int rows = chunk_rows(N, C, OC);
  for (int n0 = 0; n0 < N; n0 += rows) {
    const int m = std::min(rows, N - n0);
    const size_t out_count = (size_t)m * OC;
    float* out_f32 = residual != nullptr
                         ? widened(kOutputRows, residual + (size_t)n0 * OC, out_count)
                         : scratch(kOutputRows, out_count);
    const float* inp_f32 = widened(kInputRows, inp + (size_t)n0 * C, (size_t)m * C);
    forward_direct(out_f32, inp_f32, weight_f32, m, C, OC, residual != nullptr ? 1.0f : 0.0f);
    cast_f32_to_bf16(out + (size_t)n0 * OC, out_f32, out_count);
  }
}

// The bf16 backward on widened operands, chunk by chunk of rows; dweight sums
// the chunks in chunk order, each as one product with beta = 1.
void backward_widened(Bf16* dinp, float* dweight, const Bf16* dout, const Bf16* inp,
                      const Bf16* weight, int N, int C, int OC) {
  const float* weight_f32 = dinp != nullptr ? widened(kWeight, weight, (size_t)OC * C) : nullptr;
  const int rows = chunk_rows(N, C, OC);
  float* dinp_f32 = dinp != nullptr ? scratch(kInputGradRows, (size_t)rows * C) : nullptr;
  for (int n0 = 0; n0 < N; n0 += rows) {
    const int m = std::min(rows, N - n0);
    const float* dout_f32 = widened(kOutputRows, dout + (size_t)n0 * OC, (size_t)m * OC);
    const float* inp_f32 = widened(kInputRows, inp + (size_t)n0 * C, (size_t)m * C);
    backward_direct(dinp_f32, dweight, dout_f32, inp_f32, weight_f32, m, C, OC);
    if (dinp != nullptr) cast_f32_to_bf16(dinp + (size_t)n0 * C, dinp_f32, (size_t)m * C);
  }
}

}  // namespace

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, int N, int C, int OC) {
  if (direct<T>())
    forward_direct(out, inp, weight, N, C, OC, 0.0f);
  else if constexpr (std::is_same_v<T, Bf16>)
    forward_widened(out, inp, weight, nullptr, N, C, OC);
}

template <class T>
void matmul_forward_residual(T* out, const T* inp, const T* weight, const T* residual, int N, int C,
                             int OC) {
  if (direct<T>()) {
    if (out != residual) std::memcpy(out, residual, (size_t)N * OC * sizeof(T));
    forward_direct(out, inp, weight, N, C, OC, 1.0f);
  } else if constexpr (std::is_same_v<T, Bf16>) {
    forward_widened(out, inp, weight, residual, N, C, OC);
  }
}

template <class T>
void matmul_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC) {
  if (direct<T>())
    backward_direct(dinp, dweight, dout, inp, weight, N, C, OC);
  else if constexpr (std::is_same_v<T, Bf16>)
    backward_widened(dinp, dweight, dout, inp, weight, N, C, OC);
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(matmul_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(matmul_forward_residual);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(matmul_backward);

}  // namespace llm::cpu
