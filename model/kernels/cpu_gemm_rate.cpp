// Timing the CPU GEMM (see cpu_gemm_rate.h).
#include "model/kernels/cpu_gemm_rate.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "base/bf16.h"
#include "base/rng.h"
#include "model/kernels/cpu_gemm.h"

namespace llm {
namespace {

// GFLOP/s of C (n, n) = A B^T on In operands through cpu::gemm, best of `repeats`.
template <class In>
double gemm_gflops(int n, int repeats) {
  std::vector<In> a(static_cast<size_t>(n) * n), b(a.size());
  std::vector<float> c(a.size());
  Rng rng(1);
  for (size_t i = 0; i < a.size(); ++i) {
    store(&a[i], static_cast<float>(rng.next_uniform() - 0.5));
    store(&b[i], static_cast<float>(rng.next_uniform() - 0.5));
  }
  double best = 1e30;
  for (int r = 0; r < repeats + 1; ++r) {  // first run warms up
    auto start = std::chrono::steady_clock::now();
    cpu::gemm(cpu::GemmArgs<In, float>{cpu::Op::kNone, cpu::Op::kTranspose, n, n, n, a.data(), n,
                                       b.data(), n, 0.0f, c.data(), n});
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (r > 0) best = std::min(best, took.count());
  }
  return 2.0 * n * n * n / best / 1e9;
}

}  // namespace

double measure_gemm_gflops(int n, int repeats) { return gemm_gflops<float>(n, repeats); }

double measure_bf16_gemm_gflops(int n, int repeats) { return gemm_gflops<Bf16>(n, repeats); }

}  // namespace llm
