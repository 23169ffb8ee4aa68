// CPU twin of fill_zero.
#include "model/kernels/fill.h"

#include <cstring>

namespace llm::cpu {

void fill_zero(float* x, size_t n) { std::memset(x, 0, n * sizeof(float)); }

}  // namespace llm::cpu
