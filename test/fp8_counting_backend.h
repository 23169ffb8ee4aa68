// The CPU backend counting the FP8 scales it makes: amax passes over a
// tensor (fp8_amax_scale, weights' casts included) and scales from the row
// amaxes a producer left (fp8_scale_from_row_amax), for the tests that check
// which amax passes the fused producers save (test_fp8_fused_amax.cpp,
// mpi_test_pipeline_parallel.cpp). One count per process.
#pragma once

#include "model/backend.h"

namespace llm::test_support {

struct Fp8ScaleCounts {
  int amax_passes = 0;
  int row_amax_scales = 0;
};
inline Fp8ScaleCounts fp8_scale_counts;

inline Backend fp8_counting_backend() {
  Backend backend = backend_cpu();
  backend.fp8_amax_scale = [](Fp8Scale* scale, const Bf16* x, size_t n, Fp8Format format) {
    ++fp8_scale_counts.amax_passes;
    cpu::fp8_amax_scale(scale, x, n, format);
  };
  backend.fp8_scale_from_row_amax = [](Fp8Scale* scale, const float* row_amax, int rows,
                                       Fp8Format format) {
    ++fp8_scale_counts.row_amax_scales;
    cpu::fp8_scale_from_row_amax(scale, row_amax, rows, format);
  };
  return backend;
}

}  // namespace llm::test_support
