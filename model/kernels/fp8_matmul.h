// FP8 linear layers (training.precision = "fp8", docs/training.md#fp8): the
// three steps of an FP8 GEMM on bf16 tensors, as Hopper's tensor cores run it.
//   fp8_amax_scale      a tensor's largest magnitude and its power-of-two
//                       scale (base/fp8.h fp8_scale_from_amax), into an
//                       Fp8Scale in the backend's memory;
//   fp8_cast_transpose  the tensor's fp8 codes, fp8(x * scale), row-major
//                       and/or transposed (cuBLASLt's FP8 GEMM reads both
//                       operands K-contiguous, so a backward GEMM needs the
//                       transposed copy);
//   fp8_gemm            out (M, N) = a (M, K) @ b (N, K)^T on codes, both
//                       K-contiguous, the fp32 sum times both inverse scales,
//                       plus c when given, rounded once to out's type.
// Invariants: the scale is 2^k, so the codes are exactly the format's
// round-to-nearest-even, saturating rounding of x * 2^k and dividing by 2^k is
// exact; the scale is computed from the tensor itself (current scaling), so a
// call depends on no earlier step; every pointer is in the backend's memory
// and nothing synchronizes with the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/fp8.h"
#include "base/storage_types.h"

namespace llm::cpu {

// *scale = fp8_scale_from_amax(largest |x| of x's n values, format).
void fp8_amax_scale(Fp8Scale* scale, const Bf16* x, size_t n, Fp8Format format);

// codes (rows, cols) = fp8(x * scale->scale) of x (rows, cols), and codes_t
// (cols, rows) its transpose; either may be null.
void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                        const Fp8Scale* scale, Fp8Format format);

// out (M, N) = a (M, K) @ b (N, K)^T * a_scale->inverse * b_scale->inverse
// (+ c (M, N) when c is not null), the products summed in fp32 and rounded
// once to T. c may be out for T = float (dweight += ...), not for Bf16.
template <class T>
void fp8_gemm(T* out, const T* c, const uint8_t* a, Fp8Format a_format, const Fp8Scale* a_scale,
              const uint8_t* b, Fp8Format b_format, const Fp8Scale* b_scale, int M, int N, int K);

}  // namespace llm::cpu

// CUDA twins (fp8_matmul.cu): the same contracts on device pointers, queued on
// the compute stream; fp8_gemm goes through cuBLASLt's FP8 GEMM (matmul.cu).
namespace llm::cuda {

void fp8_amax_scale(Fp8Scale* scale, const Bf16* x, size_t n, Fp8Format format);
void fp8_cast_transpose(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                        const Fp8Scale* scale, Fp8Format format);
template <class T>
void fp8_gemm(T* out, const T* c, const uint8_t* a, Fp8Format a_format, const Fp8Scale* a_scale,
              const uint8_t* b, Fp8Format b_format, const Fp8Scale* b_scale, int M, int N, int K);

}  // namespace llm::cuda
