// /proc and getrusage readers behind base/system.h.
#include "base/system.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace llm {

size_t memory_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

size_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;
}

size_t resident_bytes() {
  // /proc/self/statm: total program size, then resident pages.
  std::ifstream in("/proc/self/statm");
  size_t total_pages = 0, resident_pages = 0;
  if (!(in >> total_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

void configure_threads(int ranks_per_node) {
  if (ranks_per_node <= 1 || std::getenv("OMP_NUM_THREADS")) return;
  int threads = std::max(1, omp_get_num_procs() / ranks_per_node);
  omp_set_num_threads(threads);
}

ThreadLimit::ThreadLimit(int threads) : omp_threads_(omp_get_max_threads()) {
  omp_set_num_threads(std::min(threads, omp_threads_));
}

ThreadLimit::~ThreadLimit() { omp_set_num_threads(omp_threads_); }

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, units[u]);
}

}  // namespace llm
