// The training target that is not trained on: a position whose next token
// the loss skips (a loss mask's dropped token, a target that crosses a
// document boundary). The data loader writes it into the targets; the
// cross-entropy gives such a row a loss of 0 and a zero gradient, and the
// trainer divides by the targets that are kept (docs/training.md).
#pragma once

#include <cstdint>

namespace llm {

inline constexpr int32_t kIgnoredTarget = -1;

}  // namespace llm
