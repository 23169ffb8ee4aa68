// Facts about this process and machine that the trainer reports or checks:
// available memory (to refuse a model that cannot fit before allocating),
// resident and peak resident memory.
#pragma once

#include <cstddef>
#include <string>

namespace llm {

// MemAvailable from /proc/meminfo, in bytes (0 if unknown).
size_t memory_available_bytes();

// Peak resident set size of this process, in bytes.
size_t peak_resident_bytes();

// Resident set size of this process now, in bytes (0 if unknown).
size_t resident_bytes();

// Shares this machine's cores among the `ranks_per_node` processes on it
// (OpenMP and OpenBLAS threads), unless OMP_NUM_THREADS says otherwise.
void configure_threads(int ranks_per_node);

// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(double bytes);

}  // namespace llm
