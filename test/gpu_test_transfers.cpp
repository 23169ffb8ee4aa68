// The CUDA memory table's transfer queue (device/device_memory.h): a queued
// copy runs behind the compute stream's work queued before it, a mark waits
// for exactly the copies before it, and device_waits_for_transfers holds the
// compute stream back until the queued uploads have landed. Large buffers
// and several rounds, so that a missing ordering shows as stale data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "test/gpu_test_support.h"

namespace llm {
namespace {

using test_support::DeviceBuffer;

constexpr size_t kCount = size_t{1} << 24;  // 64 MiB of floats: copies take milliseconds

std::vector<float> pattern(float seed) {
  std::vector<float> v(kCount);
  for (size_t i = 0; i < kCount; ++i) v[i] = seed + static_cast<float>(i % 1009);
  return v;
}

TEST(CudaTransfers, ACopyDownFollowsTheComputeStreamAndItsMarkWaitsForIt) {
  LLM_SKIP_WITHOUT_GPU();
  const DeviceMemory& memory = cuda_memory();
  DeviceBuffer<float> source(kCount), target(kCount);
  float* landing = static_cast<float*>(memory.allocate_staging(kCount * sizeof(float)));
  for (int round = 0; round < 3; ++round) {
    const std::vector<float> expected = pattern(static_cast<float>(round));
    source.upload(expected);
    memory.copy(target.get(), source.get(), kCount * sizeof(float));  // queued on compute
    memory.to_host_queued(landing, target.get(), kCount * sizeof(float));
    const uint64_t mark = memory.transfer_mark();
    memory.wait_for_transfers(mark);
    EXPECT_EQ(0, std::memcmp(landing, expected.data(), kCount * sizeof(float)))
        << "round " << round;
  }
  memory.release_staging(landing);
}

TEST(CudaTransfers, TheComputeStreamWaitsForQueuedUploads) {
  LLM_SKIP_WITHOUT_GPU();
  const DeviceMemory& memory = cuda_memory();
  DeviceBuffer<float> target(kCount), after(kCount);
  float* staged = static_cast<float*>(memory.allocate_staging(kCount * sizeof(float)));
  for (int round = 0; round < 3; ++round) {
    const std::vector<float> expected = pattern(10.0f + static_cast<float>(round));
    std::copy(expected.begin(), expected.end(), staged);
    memory.to_device_queued(target.get(), staged, kCount * sizeof(float));
    memory.device_waits_for_transfers();
    memory.copy(after.get(), target.get(), kCount * sizeof(float));  // compute, after the upload
    const uint64_t mark = memory.transfer_mark();
    memory.wait_for_transfers(mark);  // the staging buffer may be rewritten next round
    EXPECT_EQ(0, std::memcmp(after.download().data(), expected.data(), kCount * sizeof(float)))
        << "round " << round;
  }
  memory.release_staging(staged);
}

}  // namespace
}  // namespace llm
