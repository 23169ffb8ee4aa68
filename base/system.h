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
// (OpenMP threads, which the CPU matmuls' library uses too), unless
// OMP_NUM_THREADS says otherwise.
void configure_threads(int ranks_per_node);

// At most `threads` OpenMP threads (the matmuls' too) while it lives; the
// previous count comes back when it goes. For work too small to gain from a team: each
// parallel region costs a fork and a join, and on a busy machine a join waits
// for a descheduled thread's next time slice (milliseconds).
class ThreadLimit {
 public:
  explicit ThreadLimit(int threads);
  ~ThreadLimit();
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int omp_threads_;
};

// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(double bytes);

}  // namespace llm
