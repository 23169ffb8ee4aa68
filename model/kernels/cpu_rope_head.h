// RoPE's rotation of one head on the CPU, shared by rope.cpp (heads rotated
// in place) and qk_norm.cpp (q and k heads rotated as QK-norm writes them),
// so the fused pass and the composition give the same bits.
// Invariant: fp32 math on the stored values, rounded once on store; the
// build's -ffp-contract=off keeps every product and sum rounded on its own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/storage_types.h"

namespace llm::cpu {

// The table row of row n: positions[n] when positions is set, else n % T.
inline int rope_position(const int32_t* positions, int n, int T) {
  return positions ? positions[n] : n % T;
}

// Rotates the pairs (x[i], x[i + D/2]) of one head, in place, by the angle
// whose cosine is c[i] and whose sine is sign * s[i] (c, s: a table row).
template <class Storage>
inline void rope_rotate_head(Storage* x, const float* c, const float* s, float sign, int D) {
  const int half = D / 2;
  Storage* hi = x + half;
#pragma omp simd
  for (int i = 0; i < half; i++) {
    const float a = to_float(x[i]), b = to_float(hi[i]), si = sign * s[i];
    store(x + i, a * c[i] - b * si);
    store(hi + i, b * c[i] + a * si);
  }
}

}  // namespace llm::cpu
