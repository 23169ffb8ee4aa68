// The FP8 conversion the kernels use (CUDA's cuda_fp8.h), under emulation:
// float to e4m3 / e5m2, rounding to nearest even and saturating to the largest
// finite value (__NV_SATFINITE, the only mode the project uses and so the only
// one declared), a NaN to the canonical 0x7f.
// Invariant: the bits of the CPU twin's conversion (base/fp8.h), which
// matches CUDA's host implementation on every float checked (its header says
// so); on a GPU the instruction cvt.rn.satfinite is the one run.
#pragma once

#include "base/fp8.h"

typedef unsigned char __nv_fp8_storage_t;

enum __nv_saturation_t {
  __NV_SATFINITE = 1,
};

enum __nv_fp8_interpretation_t {
  __NV_E4M3 = 0,
  __NV_E5M2 = 1,
};

inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t,
                                                __nv_fp8_interpretation_t interpretation) {
  return llm::float_to_fp8(
      x, interpretation == __NV_E4M3 ? llm::Fp8Format::e4m3 : llm::Fp8Format::e5m2);
}
