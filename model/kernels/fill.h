// Buffer fill: sets n floats to zero (the start of an accumulation).
#pragma once

#include <cstddef>

namespace llm::cpu {

void fill_zero(float* x, size_t n);

}  // namespace llm::cpu
