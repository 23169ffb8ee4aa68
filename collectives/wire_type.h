// The element types collectives and messages carry.
#pragma once

#include <cstddef>

namespace llm {

// Element type on the wire. bf16 is summed with fp32 arithmetic, each partial
// sum rounded to nearest even.
enum class WireType { f32, bf16 };
size_t wire_bytes(WireType type);
inline const char* to_string(WireType type) { return type == WireType::f32 ? "f32" : "bf16"; }

}  // namespace llm
