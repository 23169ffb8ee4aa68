// Tests of the CUDA emulation itself (cuda_emulation/), with small kernels of
// their own compiled against it: what a GPU would do with them, the hardware's
// launch limits, the faults that stop a kernel, and streams that really run
// side by side. A fault is sticky for the process, as on a GPU, so each one
// runs in a death test of its own.
#include <gtest/gtest.h>

#include <atomic>
#include <cfenv>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "device/cuda_runtime.cuh"
#include "device/cuda_kernel_helpers.cuh"

namespace {

using llm::cuda::launch;

template <class T>
T* device_array(size_t n) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return p;
}

template <class T>
std::vector<T> read_back(const T* p, size_t n, cudaStream_t stream = nullptr) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return host;
}

// ---- kernels ------------------------------------------------------------------------

__global__ void coordinates_kernel(int* out) {
  const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  out[block * blockDim.x * blockDim.y * blockDim.z + thread] = block * 1000 + thread;
}

// Each block sums its 256 values with block_sum (two barriers, warp shuffles).
__global__ void block_sum_kernel(float* out, const float* in) {
  const float total = llm::cuda::block_sum(in[blockIdx.x * blockDim.x + threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

// Thread i writes slot i, then (after the barrier, when `with_barrier`) reads
// its neighbour's slot: without the barrier, one of the two orders reads it
// before the neighbour has written it. Static shared memory is not poisoned
// (it keeps the last block's values), hence a salt that differs per launch.
__global__ void neighbour_kernel(int* out, int salt, bool with_barrier) {
  __shared__ int slots[64];
  slots[threadIdx.x] = (int)threadIdx.x + salt;
  if (with_barrier) __syncthreads();
  out[threadIdx.x] = slots[(threadIdx.x + 1) % blockDim.x];
}

__global__ void divergent_barrier_kernel() {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
}

__global__ void early_exit_kernel() {
  if (threadIdx.x == 5) return;
  __syncthreads();
}

__global__ void shared_kernel(float* out) {
  LLM_DYNAMIC_SHARED(float, shared);
  out[threadIdx.x] = shared[threadIdx.x];  // unwritten: the poison
}

__global__ void spin_kernel(int* flag, int* seen) {
  // Reads a flag another stream sets: only streams that run side by side end.
  volatile int* f = flag;
  while (*f == 0) std::this_thread::yield();
  *seen = 1;
}

__global__ void set_kernel(int* flag) { *flag = 1; }

// Thread 0 rounds upward across a barrier while thread 1 runs beside it: the
// floating-point control (SSE's MXCSR, x87's control word) is each fiber's own.
__global__ void rounding_kernel(int* modes, float* sums) {
  const int t = threadIdx.x;
  if (t == 0) std::fesetround(FE_UPWARD);
  __syncthreads();
  volatile float tiny = 1e-8f;
  modes[t] = std::fegetround();
  sums[t] = 1.0f + tiny;
  __syncthreads();
  if (t == 0) std::fesetround(FE_TONEAREST);
}

// ---- tests --------------------------------------------------------------------------

TEST(Emulator, EveryThreadOfEveryBlockRunsWithItsCoordinates) {
  const dim3 grid(3, 2, 2), block(4, 2, 8);
  const int n = 12 * 64;
  int* out = device_array<int>(n);
  launch(coordinates_kernel, grid, block, 0, nullptr, out);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<int> got = read_back(out, n);
  for (int b = 0; b < 12; b++)
    for (int t = 0; t < 64; t++) ASSERT_EQ(got[b * 64 + t], b * 1000 + t);
  cudaFree(out);
}

TEST(Emulator, BlockSumMatchesASequentialSum) {
  const int blocks = 5, threads = 256;
  std::vector<float> host(blocks * threads);
  for (size_t i = 0; i < host.size(); i++) host[i] = (float)(i % 17) - 8.0f;
  float* in = device_array<float>(host.size());
  float* out = device_array<float>(blocks);
  cudaMemcpyAsync(in, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice, nullptr);
  launch(block_sum_kernel, blocks, threads, 0, nullptr, out, in);
  const std::vector<float> got = read_back(out, blocks);
  for (int b = 0; b < blocks; b++) {
    float expected = 0;  // small integers: every order of summation is exact
    for (int t = 0; t < threads; t++) expected += host[b * threads + t];
    EXPECT_EQ(got[b], expected) << "block " << b;
  }
  cudaFree(in);
  cudaFree(out);
}

TEST(Emulator, EachThreadKeepsItsOwnRoundingMode) {
  int* modes = device_array<int>(2);
  float* sums = device_array<float>(2);
  launch(rounding_kernel, 1, 2, 0, nullptr, modes, sums);
  const std::vector<int> got_modes = read_back(modes, 2);
  const std::vector<float> got_sums = read_back(sums, 2);
  EXPECT_EQ(got_modes[0], FE_UPWARD);
  EXPECT_EQ(got_modes[1], FE_TONEAREST);
  EXPECT_EQ(got_sums[0], std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(got_sums[1], 1.0f);
  cudaFree(modes);
  cudaFree(sums);
}

TEST(Emulator, AMissingBarrierReadsStaleSharedMemoryUnderOneOrder) {
  int* out = device_array<int>(64);
  launch(neighbour_kernel, 1, 64, 0, nullptr, out, 1, true);
  std::vector<int> got = read_back(out, 64);
  for (int t = 0; t < 64; t++) ASSERT_EQ(got[t], (t + 1) % 64 + 1);
  // Without the barrier: forward order runs each thread to its end before the
  // next starts, so thread t reads slot t + 1 before it is written; reverse
  // order reads slot 0 (thread 63's neighbour) before thread 0 writes it.
  launch(neighbour_kernel, 1, 64, 0, nullptr, out, 100, false);
  got = read_back(out, 64);
  int stale = 0;
  for (int t = 0; t < 64; t++) stale += got[t] != (t + 1) % 64 + 100;
  EXPECT_GT(stale, 0) << "under LLM_CUDA_EMULATION_ORDER="
                      << (std::getenv("LLM_CUDA_EMULATION_ORDER") ?: "forward");
  cudaFree(out);
}

TEST(Emulator, DynamicSharedMemoryIsPoisoned) {
  float* out = device_array<float>(32);
  launch(shared_kernel, 1, 32, 32 * sizeof(float), nullptr, out);
  for (float x : read_back(out, 32)) EXPECT_TRUE(std::isnan(x));
  cudaFree(out);
}

TEST(Emulator, LaunchLimitsAreTheHardwares) {
  int* out = device_array<int>(2048);
  launch(coordinates_kernel, 1, 1025, 0, nullptr, out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the launch error is not sticky";
  launch(coordinates_kernel, dim3(1, 65536), 1, 0, nullptr, out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  launch(coordinates_kernel, 1, dim3(1, 1, 65), 0, nullptr, out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  float* floats = device_array<float>(32);
  // 48 KiB of dynamic shared memory without opting in, more after, 227 KiB at most.
  launch(shared_kernel, 1, 32, 48 << 10, nullptr, floats);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  launch(shared_kernel, 1, 32, (48 << 10) + 4, nullptr, floats);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaFuncSetAttribute(shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10),
      cudaSuccess);
  launch(shared_kernel, 1, 32, 100 << 10, nullptr, floats);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(
      cudaFuncSetAttribute(shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 << 10),
      cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(out);
  cudaFree(floats);
}

TEST(Emulator, StreamsRunSideBySideAndEventsOrderThem) {
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  int* flag = device_array<int>(2);
  cudaMemsetAsync(flag, 0, 2 * sizeof(int), a);
  cudaEvent_t cleared;
  cudaEventCreateWithFlags(&cleared, cudaEventDisableTiming);
  cudaEventRecord(cleared, a);
  cudaStreamWaitEvent(b, cleared, 0);
  // Stream a spins until stream b sets the flag: a GPU runs both at once.
  launch(spin_kernel, 1, 1, 0, a, flag, flag + 1);
  launch(set_kernel, 1, 1, 0, b, flag);
  EXPECT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  EXPECT_EQ(read_back(flag, 2, a), (std::vector<int>{1, 1}));
  cudaEventDestroy(cleared);
  cudaFree(flag);
}

TEST(Emulator, CopiesCheckWhichSideAPointerIsOn) {
  int* device = device_array<int>(4);
  std::vector<int> host(4);
  EXPECT_EQ(cudaMemcpyAsync(device, host.data(), 8 * sizeof(int), cudaMemcpyHostToDevice, nullptr),
            cudaErrorIllegalAddress);  // past the allocation
  EXPECT_EQ(cudaMemcpyAsync(host.data(), device, 4 * sizeof(int), cudaMemcpyHostToDevice, nullptr),
            cudaErrorIllegalAddress);  // the directions swapped
  cudaGetLastError();
  cudaFree(device);
}

// ---- faults: each stops the process's device, as a GPU fault does -----------------

class EmulatorFault : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

[[noreturn]] void fail_with_sync_error() {
  const cudaError_t error = cudaDeviceSynchronize();
  std::fprintf(stderr, "synchronize: %s\n", cudaGetErrorString(error));
  std::exit(error == cudaSuccess ? 0 : 1);
}

TEST_F(EmulatorFault, DivergentBarriersNameTheKernelAndBothSites) {
  EXPECT_EXIT(
      {
        launch(divergent_barrier_kernel, 1, 32, 0, nullptr);
        fail_with_sync_error();
      },
      testing::ExitedWithCode(1),
      "kernel .*divergent_barrier_kernel.*different "
      "__syncthreads.*emulation_test_emulator.cpp:[0-9]+ and "
      ".*emulation_test_emulator.cpp:[0-9]+ \\(block 0,0,0\\)");
}

TEST_F(EmulatorFault, ABarrierAfterAnExitStopsTheKernel) {
  EXPECT_EXIT(
      {
        launch(early_exit_kernel, 2, 64, 0, nullptr);
        fail_with_sync_error();
      },
      testing::ExitedWithCode(1), "kernel .*early_exit_kernel.*(ends|ended)");
}

TEST_F(EmulatorFault, WorkAfterAFaultIsSkippedAndTheErrorStays) {
  EXPECT_EXIT(
      {
        int* out = device_array<int>(1);
        launch(early_exit_kernel, 1, 64, 0, nullptr);
        launch(set_kernel, 1, 1, 0, nullptr, out);
        cudaDeviceSynchronize();
        const bool sticky = cudaGetLastError() != cudaSuccess && cudaGetLastError() != cudaSuccess;
        std::exit(sticky ? 3 : 0);
      },
      testing::ExitedWithCode(3), "");
}

}  // namespace
