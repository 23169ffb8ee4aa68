// The CUDA runtime of the backend: device count and choice, the compute,
// communication and transfer streams, grow-only scratch, and the
// device-memory table (cudaMalloc, copies on the compute stream, queued
// copies on the transfer stream).
// Invariants: device memory is only allocated when arenas are built, at
// start-up; nothing here is called per step except the copies; a transfer
// mark is an event recorded on the transfer stream, kept until the host has
// waited past it.
#include <cstdio>
#include <deque>
#include <utility>
#include <vector>

#include "device/cuda_runtime.cuh"
#include "device/device.h"
#include "device/device_memory.h"
#include "collectives/watchdog.h"

namespace llm {

const bool kBuiltWithCuda = true;
#ifdef LLM_CUDA_EMULATION
const bool kCudaEmulated = true;
#else
const bool kCudaEmulated = false;
#endif
#ifdef LLM_WITH_CUDNN
const bool kBuiltWithCudnn = true;
#else
const bool kBuiltWithCudnn = false;
#endif

namespace cuda {
namespace {

struct Streams {
  cudaStream_t compute = nullptr;
  cudaStream_t gather = nullptr;
  cudaStream_t reduce = nullptr;
  cudaStream_t p2p = nullptr;
  cudaStream_t transfer = nullptr;
  Streams() {
    LLM_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    LLM_CUDA_CHECK(cudaStreamCreateWithFlags(&gather, cudaStreamNonBlocking));
    LLM_CUDA_CHECK(cudaStreamCreateWithFlags(&reduce, cudaStreamNonBlocking));
    LLM_CUDA_CHECK(cudaStreamCreateWithFlags(&p2p, cudaStreamNonBlocking));
    LLM_CUDA_CHECK(cudaStreamCreateWithFlags(&transfer, cudaStreamNonBlocking));
  }
};

Streams& streams() {
  static Streams s;  // on the device selected when first used
  return s;
}

void* allocate(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_bytes, &total_bytes);
    char call[128];
    std::snprintf(call, sizeof call, "cudaMalloc of %zu bytes (%zu of %zu free)", bytes, free_bytes,
                  total_bytes);
    throw_cuda_error(call, cudaGetErrorString(status), __FILE__, __LINE__);
  }
  // On the compute stream (which does not wait for the legacy default
  // stream), so a copy queued right after cannot be overtaken by the fill.
  LLM_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, compute_stream()));
  wait_for_stream(compute_stream());
  return p;
}

void release(void* p) {
  if (p) cudaFree(p);  // at exit the context may already be gone; nothing to report
}

void to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  LLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, compute_stream()));
  wait_for_stream(compute_stream());
}

void to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  // Into pageable memory cudaMemcpyAsync returns only once the copy is done,
  // so it would block the host, unwatched, behind all the work queued before
  // it (a collective stalled on a lost peer, say): that work is waited for
  // first, under the watchdog, and the copy is then all the call waits for.
  wait_for_stream(compute_stream());
  LLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, compute_stream()));
  wait_for_stream(compute_stream());  // a page-locked destination
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  LLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_stream()));
}

void synchronize() { wait_for_stream(compute_stream()); }

void* allocate_staging(size_t bytes) {
  void* p = nullptr;
  if (bytes > 0) LLM_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}

void release_staging(void* p) {
  if (p) cudaFreeHost(p);  // at exit the context may already be gone
}

// From page-locked memory the copy is truly asynchronous (from pageable memory
// CUDA would stage it and could return before reading the source).
void to_device_async(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  LLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, compute_stream()));
}

// The transfer queue: copies on the transfer stream, each behind the compute
// stream's work queued before it, and marks the host can wait for.
class TransferQueue {
 public:
  ~TransferQueue() {
    for (cudaEvent_t event : free_) cudaEventDestroy(event);  // at exit the context may be gone
    for (auto& [mark, event] : marks_) cudaEventDestroy(event);
  }

  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return;
    after(compute_stream(), streams().transfer);
    LLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, streams().transfer));
  }

  uint64_t mark() {
    cudaEvent_t event = acquire();
    LLM_CUDA_CHECK(cudaEventRecord(event, streams().transfer));
    marks_.emplace_back(++marked_, event);
    return marked_;
  }

  void wait_for(uint64_t mark) {
    while (!marks_.empty() && marks_.front().first <= mark) {
      wait_for_event(marks_.front().second);
      free_.push_back(marks_.front().second);
      marks_.pop_front();
    }
  }

  void device_waits() { after(streams().transfer, compute_stream()); }

 private:
  cudaEvent_t acquire() {
    if (free_.empty()) {
      cudaEvent_t event = nullptr;
      LLM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      return event;
    }
    cudaEvent_t event = free_.back();
    free_.pop_back();
    return event;
  }
  // `waiting` runs its later work after what `first` has queued so far. The
  // wait captures the record, so the event is free again at once.
  void after(cudaStream_t first, cudaStream_t waiting) {
    cudaEvent_t event = acquire();
    LLM_CUDA_CHECK(cudaEventRecord(event, first));
    LLM_CUDA_CHECK(cudaStreamWaitEvent(waiting, event, 0));
    free_.push_back(event);
  }

  uint64_t marked_ = 0;
  std::deque<std::pair<uint64_t, cudaEvent_t>> marks_;  // recorded, not yet waited past
  std::vector<cudaEvent_t> free_;
};

TransferQueue& transfers() {
  static TransferQueue queue;
  return queue;
}

void to_host_queued(void* dst, const void* src, size_t bytes) {
  transfers().copy(dst, src, bytes, cudaMemcpyDeviceToHost);
}
void to_device_queued(void* dst, const void* src, size_t bytes) {
  transfers().copy(dst, src, bytes, cudaMemcpyHostToDevice);
}
uint64_t transfer_mark() { return transfers().mark(); }
void wait_for_transfers(uint64_t mark) { transfers().wait_for(mark); }
void device_waits_for_transfers() { transfers().device_waits(); }

}  // namespace

cudaStream_t compute_stream() { return streams().compute; }

void wait_for_event(cudaEvent_t event) {
  cudaError_t status = cudaSuccess;
  watchdog_wait_device("a device synchronize", [&] {
    status = cudaEventQuery(event);
    return status != cudaErrorNotReady;
  });
  LLM_CUDA_CHECK(status);
}

void wait_for_stream(cudaStream_t stream) {
  // One event serves every wait: the host waits on one stream at a time.
  static const cudaEvent_t reached = [] {
    cudaEvent_t event = nullptr;
    LLM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }();
  LLM_CUDA_CHECK(cudaEventRecord(reached, stream));
  wait_for_event(reached);
}

namespace {
uint64_t scratch_moves = 0;
}
uint64_t scratch_epoch() { return scratch_moves; }

void* GrowingScratch::reserve(size_t bytes) {
  if (bytes <= capacity_) return buffer_;
  cudaStream_t stream = compute_stream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  LLM_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  // (fmt's compile-time format strings do not build under nvcc: no LLM_CHECK here)
  if (capture != cudaStreamCaptureStatusNone)
    throw_cuda_error("GrowingScratch::reserve (CUDA graphs)",
                     "a scratch buffer may not grow inside a capture: the captured shape must "
                     "run eagerly first",
                     __FILE__, __LINE__);
  scratch_moves++;
  if (buffer_) LLM_CUDA_CHECK(cudaFreeAsync(buffer_, stream));
  buffer_ = nullptr;
  LLM_CUDA_CHECK(cudaMallocAsync(&buffer_, bytes, stream));
  capacity_ = bytes;
  return buffer_;
}
cudaStream_t gather_stream() { return streams().gather; }
cudaStream_t reduce_stream() { return streams().reduce; }
cudaStream_t p2p_stream() { return streams().p2p; }

}  // namespace cuda

const DeviceMemory& cuda_memory() {
  static const DeviceMemory memory{cuda::allocate,
                                   cuda::release,
                                   cuda::to_device,
                                   cuda::to_host,
                                   cuda::copy,
                                   cuda::synchronize,
                                   cuda::allocate_staging,
                                   cuda::release_staging,
                                   cuda::to_device_async,
                                   cuda::to_host_queued,
                                   cuda::to_device_queued,
                                   cuda::transfer_mark,
                                   cuda::wait_for_transfers,
                                   cuda::device_waits_for_transfers};
  return memory;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a machine without a GPU
    return 0;
  }
  return count;
}

void cuda_use_device(int ordinal) { LLM_CUDA_CHECK(cudaSetDevice(ordinal)); }

namespace {
bool gemm_autotune_on = false;
}
void cuda_set_gemm_autotune(bool on) { gemm_autotune_on = on; }
bool cuda::gemm_autotune() { return gemm_autotune_on; }

namespace {
bool deterministic_on = true;
}
void cuda_set_deterministic(bool on) { deterministic_on = on; }
bool cuda::deterministic() { return deterministic_on; }

namespace {
struct MemoryInfo {
  size_t free = 0, total = 0;
};
MemoryInfo memory_info() {
  MemoryInfo info;
  LLM_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total));
  return info;
}
}  // namespace

size_t cuda_free_bytes() { return memory_info().free; }

size_t cuda_used_bytes() {
  const MemoryInfo info = memory_info();
  return info.total - info.free;
}

}  // namespace llm
