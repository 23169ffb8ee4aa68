// Facts about this process and machine that the trainer reports or checks:
// available memory (to refuse a model that cannot fit before allocating) and
// peak resident memory.
#pragma once

#include <cstddef>
#include <string>

namespace llm {

// MemAvailable from /proc/meminfo, in bytes (0 if unknown).
size_t memory_available_bytes();

// Peak resident set size of this process, in bytes.
size_t peak_resident_bytes();

// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(double bytes);

}  // namespace llm
