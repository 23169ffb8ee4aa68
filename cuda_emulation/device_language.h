// The device side of CUDA C++ as host C++: the qualifiers, the built-in
// thread coordinates, barriers, warp shuffles, the few intrinsics the
// kernels use, and the launch that queues a grid on a stream.
// A kernel runs on the host, its blocks one after another and each block's
// threads as fibers of one host thread (block_scheduler.h). Block-wide and
// warp-wide operations are real rendezvous of those fibers, so a missing
// barrier reads stale data under one of the scheduling orders, and a barrier
// that not every thread reaches stops the run naming the kernel.
// Invariants: threadIdx, blockIdx, blockDim and gridDim are those of the
// fiber now running; __shared__ variables are one per host thread, which is
// one per running block (a stream runs one block at a time); dynamic shared
// memory is allocated to exactly the launch's size and poisoned (NaN bytes)
// before each block.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- qualifiers ----------------------------------------------------------------------

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// Empty: inlining is nvcc's concern, and libstdc++ spells
// __attribute__((__noinline__)), which must stay valid.
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __restrict__ __restrict
// Shared by the fibers of the block now running on this host thread.
#define __shared__ static thread_local

namespace cuda_emulation {

// The coordinates of the fiber now running (set by the block scheduler).
struct ThreadCoordinates {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
extern thread_local const ThreadCoordinates* current_coordinates
    __attribute__((tls_model("initial-exec")));

// Rendezvous of the block's threads at a __syncthreads (named by its site).
void sync_block(const char* file, int line);

// Rendezvous of the calling warp's lanes: each posts `argument`; the last to
// arrive calls `on_all_arrived(arguments, lanes)` with every lane's argument
// in lane order, then all go on. All lanes must arrive from the same site
// (`what` names the operation in errors).
void sync_warp(const char* what, void* argument,
               void (*on_all_arrived)(void** arguments, int lanes));

// This block's dynamic shared memory (the launch's size, poisoned).
void* dynamic_shared_memory();

// Stops the running kernel with an error naming it and `why`.
[[noreturn]] void kernel_fault(const char* why);

// One queued launch: checks the configuration now (the error is returned, as
// cudaGetLastError would report it) and runs `thread` once per thread of
// every block on the stream's worker.
cudaError_t launch(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, std::function<void()> thread);

// The arguments of a kernel converted to its parameter types, as <<<>>> does,
// and copied: the launch runs later, on the stream.
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                          cudaStream_t stream, Args&&... args) {
  auto body = [kernel, parameters = std::tuple<std::decay_t<Params>...>(
                           std::forward<Args>(args)...)] { std::apply(kernel, parameters); };
  return launch(reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, stream,
                std::move(body));
}

// A warp shuffle: each lane receives `value` of lane `source(lane)`.
template <class T>
struct ShuffleSlot {
  T value;
  T result;
  int source;
};

template <class T>
void exchange_in_warp(void** arguments, int lanes) {
  for (int lane = 0; lane < lanes; lane++) {
    auto* slot = static_cast<ShuffleSlot<T>*>(arguments[lane]);
    if (slot->source < 0 || slot->source >= lanes)
      kernel_fault("a shuffle reads a lane outside the warp");
    slot->result = static_cast<ShuffleSlot<T>*>(arguments[slot->source])->value;
  }
}

void check_full_mask(unsigned mask, const char* what);

}  // namespace cuda_emulation

// ---- built-in coordinates --------------------------------------------------------------

#define threadIdx (::cuda_emulation::current_coordinates->thread_idx)
#define blockIdx (::cuda_emulation::current_coordinates->block_idx)
#define blockDim (::cuda_emulation::current_coordinates->block_dim)
#define gridDim (::cuda_emulation::current_coordinates->grid_dim)

// ---- synchronization -----------------------------------------------------------------

#define __syncthreads() ::cuda_emulation::sync_block(__FILE__, __LINE__)

template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  ::cuda_emulation::check_full_mask(mask, "__shfl_xor_sync");
  if (width != 32) ::cuda_emulation::kernel_fault("__shfl_xor_sync with a width other than 32");
  ::cuda_emulation::ShuffleSlot<T> slot{value, value,
                                        static_cast<int>(threadIdx.x % 32) ^ lane_mask};
  ::cuda_emulation::sync_warp("__shfl_xor_sync", &slot, ::cuda_emulation::exchange_in_warp<T>);
  return slot.result;
}

// ---- intrinsics and device math ------------------------------------------------------

inline float __uint_as_float(unsigned bits) { return std::bit_cast<float>(bits); }
inline unsigned __float_as_uint(float value) { return std::bit_cast<unsigned>(value); }

// CUDA's integer min and max, found unqualified in device code.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
