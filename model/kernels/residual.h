// Residual connection: out = a + b elementwise (out may alias a or b).
// Its backward is the identity, so it has no backward kernel.
#pragma once

#include <cstddef>

namespace llm::cpu {

void residual_forward(float* out, const float* a, const float* b, size_t n);

}  // namespace llm::cpu
