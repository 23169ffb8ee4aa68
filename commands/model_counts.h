// `./train config --config FILE --counts`: a config's parameter count (by
// unit) and FLOPs per optimizer step as one JSON object, from the layout and
// model/flops.h, so that scripts (tools/compare_pytorch.py) read the
// trainer's numbers instead of keeping formulas of their own.
#pragma once

#include <string>

#include "schema/config.h"

namespace llm {

std::string model_counts_json(const Config& config);

}  // namespace llm
