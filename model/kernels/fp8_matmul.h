// FP8 linear layers (training.precision = "fp8", docs/training.md#fp8): the
// three steps of an FP8 GEMM on bf16 tensors, as Hopper's tensor cores run it.
//   fp8_amax_scale      a tensor's largest magnitude and its power-of-two
//                       scale (base/fp8.h fp8_scale_from_amax), into an
//                       Fp8Scale in the backend's memory;
//   fp8_scale_from_row_amax  the same scale from the amaxes of the tensor's
//                       rows, which the kernel that wrote it left beside it
//                       (rmsnorm_forward's and swiglu_forward's row_amax):
//                       no pass over the tensor;
//   fp8_cast_amax       delayed scaling's cast: the codes with a given scale,
//                       the tensor's amax folded into a running maximum in
//                       the same pass; fp8_amax_fold folds amaxes (a
//                       producer's row amaxes) into one;
//   fp8_cast_transpose  the tensor's fp8 codes, fp8(x * scale), row-major
//                       and/or transposed (cuBLASLt's FP8 GEMM reads both
//                       operands K-contiguous, so a backward GEMM needs the
//                       transposed copy);
//   fp8_gemm            out (M, N) = a (M, K) @ b (N, K)^T on codes, both
//                       K-contiguous, the fp32 sum times both inverse scales,
//                       plus c when given, rounded once to out's type;
//                       with Fp8Accumulation::fast (the forward GEMMs, as
//                       Transformer Engine runs them) or promoted (dgrad,
//                       wgrad).
// Invariants: the scale is 2^k, so the codes are exactly the format's
// round-to-nearest-even, saturating rounding of x * 2^k and dividing by 2^k is
// exact; fp8_amax_scale's scale is computed from the tensor itself (current
// scaling), so a call depends on no earlier step (delayed scaling's scale
// comes from earlier steps' amaxes: model/linear_layers.h); every pointer is
// in the backend's memory and nothing synchronizes with the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/fp8.h"
#include "base/storage_types.h"

namespace llm {

// How Hopper's FP8 tensor cores sum a GEMM's products (cuBLASLt's
// CUBLASLT_MATMUL_DESC_FAST_ACCUM): they keep about 14 bits of a K-step's
// sum (DeepSeek-V3's report, 3.3.2, measured it on an H800; our H200 op test
// too). promoted (FAST_ACCUM 0, the default) adds those partial sums into
// fp32 every few K-steps, "split accumulation"; fast (1) keeps summing in the
// narrower accumulator, faster and less accurate (cuBLASLt's header:
// "intermediate results will not periodically be promoted to a higher
// precision"). Transformer Engine runs its forward GEMMs fast and dgrad and
// wgrad promoted (pytorch/module/base.py: _2X_ACC_FPROP = False, _2X_ACC_DGRAD
// = _2X_ACC_WGRAD = True). The CPU twin sums in fp32 either way.
enum class Fp8Accumulation { promoted, fast };

}  // namespace llm

namespace llm::cpu {

// *scale = fp8_scale_from_amax(largest |x| of x's n values, format).
void fp8_amax_scale(Fp8Scale* scale, const Bf16* x, size_t n, Fp8Format format);

// *scale = fp8_scale_from_amax(the largest of row_amax's `rows` amaxes,
// format): fp8_amax_scale's scale of the tensor whose rows they are.
void fp8_scale_from_row_amax(Fp8Scale* scale, const float* row_amax, int rows, Fp8Format format);

// codes (rows, cols) = fp8(x * scale->scale) of x (rows, cols), and codes_t
// (cols, rows) its transpose; either may be null.
void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                        const Fp8Scale* scale, Fp8Format format);

// codes (n) = fp8(x * scale->scale) of x (n), as fp8_cast_transpose's codes;
// *amax = the larger of *amax and the largest |x| (fp8_amax_of; NaN wins).
void fp8_cast_amax(uint8_t* codes, float* amax, const Bf16* x, size_t n, const Fp8Scale* scale,
                   Fp8Format format);

// *amax = the largest of *amax and amaxes' `count` values (fp8_amax_of).
void fp8_amax_fold(float* amax, const float* amaxes, int count);

// out (M, N) = a (M, K) @ b (N, K)^T * a_scale->inverse * b_scale->inverse
// (+ c (M, N) when c is not null), the products summed in fp32 and rounded
// once to T. c may be out for T = float (dweight += ...), not for Bf16.
// `accumulation` changes nothing here: the products are summed in fp32 either
// way, so both give the same bits.
template <class T>
void fp8_gemm(T* out, const T* c, const uint8_t* a, Fp8Format a_format, const Fp8Scale* a_scale,
              const uint8_t* b, Fp8Format b_format, const Fp8Scale* b_scale, int M, int N, int K,
              Fp8Accumulation accumulation);

}  // namespace llm::cpu

// CUDA twins (fp8_matmul.cu): the same contracts on device pointers, queued on
// the compute stream; fp8_gemm goes through cuBLASLt's FP8 GEMM (matmul.cu).
namespace llm::cuda {

void fp8_amax_scale(Fp8Scale* scale, const Bf16* x, size_t n, Fp8Format format);
void fp8_scale_from_row_amax(Fp8Scale* scale, const float* row_amax, int rows, Fp8Format format);
void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                        const Fp8Scale* scale, Fp8Format format);
void fp8_cast_amax(uint8_t* codes, float* amax, const Bf16* x, size_t n, const Fp8Scale* scale,
                   Fp8Format format);
void fp8_amax_fold(float* amax, const float* amaxes, int count);
template <class T>
void fp8_gemm(T* out, const T* c, const uint8_t* a, Fp8Format a_format, const Fp8Scale* a_scale,
              const uint8_t* b, Fp8Format b_format, const Fp8Scale* b_scale, int M, int N, int K,
              Fp8Accumulation accumulation);

}  // namespace llm::cuda
