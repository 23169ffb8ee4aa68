// The measured rate of the CPU GEMM (cpu_gemm.h): the reference of the CPU
// benchmark's achieved fraction, the trainer's CPU peak and the calibrated
// hardware profile of this machine.
// Invariant: a rate is FLOPs over the best of `repeats` timed products after
// one warm-up, on operands that are not zero.
#pragma once

namespace llm {

// GFLOP/s of a square fp32 product of size n, C (n, n) = A B^T.
double measure_gemm_gflops(int n, int repeats);

// The same with bf16 operands; only where the CPU multiplies them natively
// (bf16_gemm_native: elsewhere bf16 is widened, at the fp32 rate).
double measure_bf16_gemm_gflops(int n, int repeats);

}  // namespace llm
