// Tests of the emulated CUDA graphs (cuda_emulation/graphs.cpp): a captured
// kernel sequence runs nothing until launched and each replay gives the bits
// of the same sequence launched eagerly; the calls CUDA refuses during a
// capture (a host wait on the capturing stream, an allocation, a wait on work
// outside the capture, a query of an event recorded in it, a copy through
// pageable memory) are refused with CUDA's error and invalidate the capture.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "device/cuda_runtime.cuh"

namespace {

using llm::cuda::launch;

constexpr int kCount = 1000;

// x = a * x + b, one element per thread: replayed twice it is not idempotent,
// so a replay that ran twice or not at all shows.
__global__ void affine_kernel(float* x, float a, float b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}

// y += x
__global__ void accumulate_kernel(float* y, const float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

class EmulatedGraphs : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&x_, kCount * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&y_, kCount * sizeof(float)), cudaSuccess);
    restart();
  }
  // x and y as they start.
  void restart() {
    std::vector<float> start(kCount);
    for (int i = 0; i < kCount; ++i) start[i] = 0.25f * i - 7.0f;
    for (float* p : {x_, y_}) {
      ASSERT_EQ(
          cudaMemcpyAsync(p, start.data(), kCount * sizeof(float), cudaMemcpyHostToDevice, stream_),
          cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  }
  void TearDown() override {
    cudaFree(x_);
    cudaFree(y_);
  }

  // The sequence under test, on `stream_`: three kernels and a device copy.
  void queue_sequence() {
    const dim3 grid((kCount + 127) / 128), block(128);
    launch(affine_kernel, grid, block, 0, stream_, x_, 1.5f, 0.5f, kCount);
    launch(accumulate_kernel, grid, block, 0, stream_, y_, x_, kCount);
    ASSERT_EQ(cudaMemcpyAsync(x_, y_, kCount * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
              cudaSuccess);
    launch(affine_kernel, grid, block, 0, stream_, y_, -0.5f, 2.0f, kCount);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }

  std::vector<float> read(const float* p) {
    std::vector<float> host(kCount);
    EXPECT_EQ(
        cudaMemcpyAsync(host.data(), p, kCount * sizeof(float), cudaMemcpyDeviceToHost, stream_),
        cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return host;
  }

  cudaStreamCaptureStatus status() {
    cudaStreamCaptureStatus s = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(stream_, &s), cudaSuccess);
    return s;
  }

  // Ends a capture that a refused call has invalidated.
  void expect_invalidated() {
    EXPECT_EQ(status(), cudaStreamCaptureStatusInvalidated);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    EXPECT_EQ(status(), cudaStreamCaptureStatusNone);
    cudaGetLastError();
  }

  cudaStream_t stream_ = nullptr;
  float* x_ = nullptr;
  float* y_ = nullptr;
};

TEST_F(EmulatedGraphs, ReplaysGiveTheEagerBits) {
  // Eagerly, twice: the bits to match.
  queue_sequence();
  queue_sequence();
  const std::vector<float> eager_x = read(x_), eager_y = read(y_);
  restart();

  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(status(), cudaStreamCaptureStatusActive);
  queue_sequence();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(status(), cudaStreamCaptureStatusNone);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);  // the executable graph stands alone

  std::vector<float> start = read(x_);
  EXPECT_EQ(start[3], 0.25f * 3 - 7.0f) << "the capture ran its work";
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(read(x_), eager_x);
  EXPECT_EQ(read(y_), eager_y);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

TEST_F(EmulatedGraphs, AHostWaitOnTheCapturingStreamIsRefused) {
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  queue_sequence();
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorStreamCaptureUnsupported);
  // Work queued after the break is refused too.
  EXPECT_EQ(cudaMemsetAsync(x_, 0, sizeof(float), stream_), cudaErrorStreamCaptureInvalidated);
  expect_invalidated();
}

TEST_F(EmulatedGraphs, CopiesThroughPageableMemoryAreRefused) {
  std::vector<float> pageable(kCount);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(
      cudaMemcpyAsync(pageable.data(), x_, kCount * sizeof(float), cudaMemcpyDeviceToHost, stream_),
      cudaErrorStreamCaptureUnsupported);
  expect_invalidated();
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(
      cudaMemcpyAsync(x_, pageable.data(), kCount * sizeof(float), cudaMemcpyHostToDevice, stream_),
      cudaErrorStreamCaptureUnsupported);
  expect_invalidated();
}

TEST_F(EmulatedGraphs, AllocationsAreRefusedOnAnyThreadInGlobalMode) {
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* p = nullptr;
  std::thread([&] { EXPECT_EQ(cudaMalloc(&p, 256), cudaErrorStreamCaptureUnsupported); }).join();
  EXPECT_EQ(p, nullptr);
  expect_invalidated();
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaMallocAsync(&p, 256, stream_), cudaErrorStreamCaptureUnsupported);
  expect_invalidated();
}

TEST_F(EmulatedGraphs, ThreadLocalAndRelaxedModesAllowOtherThreadsAllocations) {
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* p = nullptr;
  std::thread([&] { EXPECT_EQ(cudaMalloc(&p, 256), cudaSuccess); }).join();
  EXPECT_EQ(status(), cudaStreamCaptureStatusActive);
  EXPECT_EQ(cudaFree(p), cudaErrorStreamCaptureUnsupported);  // this thread's own capture
  expect_invalidated();
  EXPECT_EQ(cudaFree(p), cudaSuccess);

  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&p, 256), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

TEST_F(EmulatedGraphs, EventsRecordedInACaptureCannotBeWaitedForByTheHost) {
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  queue_sequence();
  ASSERT_EQ(cudaEventRecord(event, stream_), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorCapturedEvent);
  EXPECT_EQ(cudaEventSynchronize(event), cudaErrorCapturedEvent);
  ASSERT_EQ(cudaStreamWaitEvent(stream_, event, 0), cudaSuccess);  // in-stream: allowed
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  // An eager record makes it an ordinary event again.
  ASSERT_EQ(cudaEventRecord(event, stream_), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(event), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
}

TEST_F(EmulatedGraphs, ACaptureMayNotWaitForWorkOutsideIt) {
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, other), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(stream_, event, 0), cudaErrorStreamCaptureIsolation);
  expect_invalidated();
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(other), cudaSuccess);
}

TEST_F(EmulatedGraphs, CapturesBeginAndEndOnceOnTheirStream) {
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  std::thread([&] {
    cudaGraph_t elsewhere = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream_, &elsewhere), cudaErrorStreamCaptureWrongThread);
  }).join();
  EXPECT_EQ(status(), cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  cudaGetLastError();
}

}  // namespace
