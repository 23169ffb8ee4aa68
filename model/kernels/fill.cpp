// CPU twin of fill_zero. All-zero bits are +0 in both fp32 and bf16.
#include "model/kernels/fill.h"

#include <cstring>

namespace llm::cpu {

void fill_zero(float* x, size_t n) { std::memset(x, 0, n * sizeof(float)); }

void fill_zero_bf16(Bf16* x, size_t n) { std::memset(x, 0, n * sizeof(Bf16)); }

}  // namespace llm::cpu
