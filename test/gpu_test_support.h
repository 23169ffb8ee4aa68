// Shared helpers of the GPU suites (gpu_test_*.cpp, executable llm_gpu_tests,
// ctest label "gpu"): skipping with a reason where there is no CUDA device,
// and device buffers filled from / read back into host vectors through the
// CUDA backend's memory table, so the suites are plain C++.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "core/device.h"
#include "model/backend.h"

// Skips the calling test, saying why, unless this build and machine have a GPU.
#define LLM_SKIP_WITHOUT_GPU()                                                           \
  do {                                                                                   \
    if (::llm::cuda_device_count() == 0)                                                 \
      GTEST_SKIP() << (::llm::kBuiltWithCuda ? "no CUDA device on this machine"           \
                                             : "this build has no CUDA backend (no nvcc)"); \
  } while (0)

namespace llm::test_support {

// n elements of T in CUDA device memory (zero-filled), freed on destruction.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n), p_(static_cast<T*>(cuda_memory().allocate(n * sizeof(T)))) {}
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cuda_memory().release(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) { cuda_memory().to_device(p_, host.data(), n_ * sizeof(T)); }
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

}  // namespace llm::test_support
