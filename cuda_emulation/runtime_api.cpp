// The emulated runtime's device, memory and error calls: devices whose
// memory is the process's host memory, tracked so that copies can check
// which side a pointer lives on and cudaMemGetInfo can count what is in use.
// Invariants: fresh device memory is poisoned (0xFF bytes: NaN in fp32 and
// bf16), as cudaMalloc's contents are undefined; a copy whose device side is
// not inside a live allocation fails as an illegal address, and one whose
// host side is is an invalid value; a copy from pageable host memory reads
// the source before returning and one to it returns when done, as CUDA's.
// An asynchronous copy into page-locked memory may be made to read its
// source late (LLM_CUDA_EMULATION_COPY_LATENCY_US), so that a stream that
// overwrites the source without waiting for the copy is caught.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cuda_emulation/graphs.h"
#include "cuda_emulation/streams.h"

namespace {

// An 8-GPU node of H100s: ranks on one machine each take a device of their
// own (as NCCL needs), all of them the process's host memory.
// LLM_CUDA_EMULATION_DEVICES=N makes it an N-GPU node (a one-GPU machine, to
// rehearse several NCCL ranks on one GPU: tools/one_gpu_ranks.sh).
int emulated_devices() {
  static const int devices = [] {
    const char* value = std::getenv("LLM_CUDA_EMULATION_DEVICES");
    const int n = value ? std::atoi(value) : 8;
    return n >= 1 && n <= 64 ? n : 8;
  }();
  return devices;
}
constexpr size_t kDeviceBytes = size_t{80} << 30;  // each, as cudaMemGetInfo reports
constexpr size_t kAllocationAlignment = 256;       // cudaMalloc's

struct Allocations {
  std::mutex mutex;
  std::map<const char*, size_t> device;       // start -> bytes
  std::map<const char*, size_t> page_locked;  // start -> bytes
  size_t device_bytes = 0;
};
Allocations& allocations() {
  static Allocations* a = new Allocations();
  return *a;
}

thread_local cudaError_t last_error = cudaSuccess;

bool touches_device_allocation(const void* p, size_t bytes) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mutex);
  const char* begin = static_cast<const char*>(p);
  auto it = a.device.upper_bound(begin + bytes - 1);
  if (it == a.device.begin()) return false;
  --it;
  return it->first + it->second > begin;
}

// Whether p is inside a page-locked allocation (anywhere in it, as CUDA
// recognises a pointer into a cudaMallocHost block).
bool is_page_locked(const void* p) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mutex);
  const char* at = static_cast<const char*>(p);
  auto it = a.page_locked.upper_bound(at);
  if (it == a.page_locked.begin()) return false;
  --it;
  return at < it->first + it->second;
}

// LLM_CUDA_EMULATION_COPY_LATENCY_US (default 0): how late an asynchronous
// copy from the device into page-locked memory reads its source on its
// stream. Tests that check that nothing overwrites a source before its copy
// has read it set it.
std::chrono::microseconds copy_latency() {
  static const std::chrono::microseconds latency = [] {
    const char* value = std::getenv("LLM_CUDA_EMULATION_COPY_LATENCY_US");
    return std::chrono::microseconds(value ? std::strtol(value, nullptr, 10) : 0);
  }();
  return latency;
}

void* allocate_device(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kAllocationAlignment, bytes) != 0) return nullptr;
  std::memset(p, 0xFF, bytes);
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.device.emplace(static_cast<const char*>(p), bytes);
  a.device_bytes += bytes;
  return p;
}

bool forget_device(void* p) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.device.find(static_cast<const char*>(p));
  if (it == a.device.end()) return false;
  a.device_bytes -= it->second;
  a.device.erase(it);
  return true;
}

cudaError_t record(cudaError_t error) {
  if (error != cudaSuccess) last_error = error;
  return error;
}

}  // namespace

bool cuda_emulation::inside_device_allocation(const void* p, size_t bytes) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.device.upper_bound(static_cast<const char*>(p));
  if (it == a.device.begin()) return false;
  --it;
  const char* begin = it->first;
  return static_cast<const char*>(p) >= begin &&
         static_cast<const char*>(p) + bytes <= begin + it->second;
}

cudaError_t cuda_emulation::record_last_error(cudaError_t error) { return record(error); }

const char* cudaGetErrorString(cudaError_t error) {
  if (error != cudaSuccess && error == cuda_emulation::sticky_error()) {
    // The message of the failure itself, which names the kernel or library call.
    static thread_local std::string message;
    message = cuda_emulation::sticky_error_message();
    return message.c_str();
  }
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorIllegalState:
      return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureIsolation:
      return "dependency created on uncaptured work in another stream";
    case cudaErrorCapturedEvent:
      return "operation not permitted on an event last recorded in a capturing stream";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  if (cudaError_t error = cuda_emulation::sticky_error()) return error;
  const cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  if (cudaError_t error = cuda_emulation::sticky_error()) return error;
  return last_error;
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return record(cudaErrorInvalidValue);
  *count = emulated_devices();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return record(device >= 0 && device < emulated_devices() ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return record(cudaErrorInvalidValue);
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mutex);
  *total_bytes = kDeviceBytes;
  *free_bytes = a.device_bytes < kDeviceBytes ? kDeviceBytes - a.device_bytes : 0;
  return cuda_emulation::sticky_error();
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (!p) return record(cudaErrorInvalidValue);
  *p = nullptr;
  if (cudaError_t refused = cuda_emulation::refuse_if_unsafe()) return record(refused);
  if (bytes == 0) return cudaSuccess;
  size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  if (bytes > free_bytes || !(*p = allocate_device(bytes)))
    return record(cudaErrorMemoryAllocation);
  return cuda_emulation::sticky_error();
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  if (cudaError_t refused = cuda_emulation::refuse_if_unsafe()) return record(refused);
  cuda_emulation::wait_for_all_streams();  // cudaFree waits for the device, as CUDA's does
  if (!forget_device(p)) return record(cudaErrorInvalidValue);
  std::free(p);
  return cuda_emulation::sticky_error();
}

// In a capture CUDA makes these graph memory nodes, which the emulation does
// not model: it refuses them there (the project warms its scratch up first).
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t stream) {
  if (cudaError_t refused = cuda_emulation::refuse_if_capturing(stream)) return record(refused);
  return cudaMalloc(p, bytes);  // allocated now: earlier than the stream would, never later
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
  if (!p) return cudaSuccess;
  if (cudaError_t refused = cuda_emulation::refuse_if_capturing(stream)) return record(refused);
  return record(cuda_emulation::enqueue(stream, [p] {
    if (!forget_device(p))
      throw std::runtime_error("cudaFreeAsync of a pointer cudaMalloc did not return");
    std::free(p);
  }));
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  if (!p) return record(cudaErrorInvalidValue);
  *p = nullptr;
  if (cudaError_t refused = cuda_emulation::refuse_if_unsafe()) return record(refused);
  if (bytes == 0) return cudaSuccess;
  if (posix_memalign(p, kAllocationAlignment, bytes) != 0) return record(cudaErrorMemoryAllocation);
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.page_locked.emplace(static_cast<const char*>(*p), bytes);
  return cuda_emulation::sticky_error();
}

cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  if (cudaError_t refused = cuda_emulation::refuse_if_unsafe()) return record(refused);
  cuda_emulation::wait_for_all_streams();
  {
    Allocations& a = allocations();
    std::lock_guard<std::mutex> lock(a.mutex);
    if (a.page_locked.erase(static_cast<const char*>(p)) == 0) return record(cudaErrorInvalidValue);
  }
  std::free(p);
  return cuda_emulation::sticky_error();
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (bytes == 0) return cuda_emulation::sticky_error();
  if (!dst || !src) return record(cudaErrorInvalidValue);
  const bool device_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool device_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost &&
      kind != cudaMemcpyDeviceToDevice)
    return record(cudaErrorInvalidValue);  // the project always names the direction
  if ((device_dst && !cuda_emulation::inside_device_allocation(dst, bytes)) ||
      (device_src && !cuda_emulation::inside_device_allocation(src, bytes)))
    return record(cudaErrorIllegalAddress);
  if ((!device_dst && touches_device_allocation(dst, bytes)) ||
      (!device_src && touches_device_allocation(src, bytes)))
    return record(cudaErrorInvalidValue);
  // A copy through pageable memory is synchronous for the host: not capturable.
  if ((kind == cudaMemcpyHostToDevice && !is_page_locked(src)) ||
      (kind == cudaMemcpyDeviceToHost && !is_page_locked(dst)))
    if (cudaError_t refused = cuda_emulation::refuse_if_capturing(stream)) return record(refused);
  if (kind == cudaMemcpyHostToDevice && !is_page_locked(src)) {
    // Pageable source: read now, so the caller may reuse it at once.
    auto copy = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                    static_cast<const char*>(src) + bytes);
    return record(cuda_emulation::enqueue(
        stream, [dst, copy] { std::memcpy(dst, copy->data(), copy->size()); }));
  }
  const std::chrono::microseconds late =
      kind == cudaMemcpyDeviceToHost ? copy_latency() : std::chrono::microseconds(0);
  cudaError_t queued = cuda_emulation::enqueue(stream, [dst, src, bytes, late] {
    if (late.count() > 0) std::this_thread::sleep_for(late);
    std::memcpy(dst, src, bytes);
  });
  if (queued == cudaSuccess && kind == cudaMemcpyDeviceToHost && !is_page_locked(dst))
    return cudaStreamSynchronize(stream);  // pageable destination: done on return
  return record(queued);
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cuda_emulation::sticky_error();
  if (!cuda_emulation::inside_device_allocation(p, bytes)) return record(cudaErrorIllegalAddress);
  return record(
      cuda_emulation::enqueue(stream, [p, value, bytes] { std::memset(p, value, bytes); }));
}
