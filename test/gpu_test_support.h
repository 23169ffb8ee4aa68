// Shared helpers of the GPU suites (gpu_test_*.cpp, executable llm_gpu_tests,
// ctest label "gpu") and of the op harness's CUDA rows: skipping with a
// reason where there is no CUDA device, device buffers filled from / read back into host vectors
// through the CUDA backend's memory table (so the suites are plain C++), random host data and the
// elementwise comparison against the CPU twin with per-element bounds.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "device/device.h"
#include "base/bf16.h"
#include "model/backend.h"
#include "test/kernel_test_support.h"

// Skips the calling test, saying why, unless this build and machine have a GPU.
#define LLM_SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                      \
    if (::llm::cuda_device_count() == 0)                                                    \
      GTEST_SKIP() << (::llm::kBuiltWithCuda ? "no CUDA device on this machine"             \
                                             : "this build has no CUDA backend (no nvcc)"); \
  } while (0)

namespace llm::test_support {

// n elements of T in CUDA device memory (zero-filled), freed on destruction.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n)
      : n_(n), p_(static_cast<T*>(cuda_memory().allocate(n * sizeof(T)))) {}
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cuda_memory().release(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    cuda_memory().to_device(p_, host.data(), n_ * sizeof(T));
  }
  // Waits for queued kernels (the copy is on the same stream) and reads back.
  std::vector<T> download() const {
    std::vector<T> host(n_);
    cuda_memory().to_host(host.data(), p_, n_ * sizeof(T));
    return host;
  }

 private:
  size_t n_;
  T* p_;
};

using Bf16s = std::vector<Bf16>;
using Doubles = std::vector<double>;

inline Floats random_floats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Floats x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// Each float rounded to nearest even.
inline Bf16s to_bf16s(const Floats& x) {
  Bf16s out(x.size());
  for (size_t i = 0; i < x.size(); i++) out[i] = to_bf16(x[i]);
  return out;
}

// float or Bf16 values, exactly, as doubles.
template <class S>
Doubles to_doubles(const std::vector<S>& x) {
  Doubles out(x.size());
  for (size_t i = 0; i < x.size(); i++) out[i] = to_float(x[i]);
  return out;
}

// |actual[i] - expected[i]| <= bound[i] for every i (NaN fails); reports the
// first few misses and their count.
inline void expect_within(const Doubles& actual, const Doubles& expected, const Doubles& bound,
                          const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  ASSERT_EQ(bound.size(), expected.size()) << what;
  size_t misses = 0;
  for (size_t i = 0; i < actual.size(); i++) {
    if (std::fabs(actual[i] - expected[i]) <= bound[i]) continue;
    if (++misses <= 5)
      ADD_FAILURE() << what << "[" << i << "]: gpu " << actual[i] << " cpu " << expected[i]
                    << " differ by " << std::fabs(actual[i] - expected[i]) << " > " << bound[i];
  }
  EXPECT_EQ(misses, 0u) << what << ": elements out of tolerance";
}

// abs + rel * |expected[i]| per element.
inline Doubles tolerance_bounds(const Doubles& expected, Tolerance tolerance) {
  Doubles bound(expected.size());
  for (size_t i = 0; i < expected.size(); i++)
    bound[i] = tolerance.abs + tolerance.rel * std::fabs(expected[i]);
  return bound;
}

}  // namespace llm::test_support
