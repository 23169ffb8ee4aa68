// A bias on every row on the GPU (see row_bias.h). A row's columns are taken
// as slots: without RoPE each column is one slot; with it each (c, c + D/2)
// pair of a rotated head is one slot (a column past the last pair of an odd
// D, and every column after the rotated heads, is a slot of its own), so one
// thread reads and writes both columns of a pair and the in-place rotation
// needs no barrier. Forward: one thread per (row, slot) in a grid-stride
// loop, fp32 math rounded on store; with RoPE the biased pair is rounded to T
// as row_bias stores it, then rotated as rope.cu rotates it
// (rope_device.cuh). Backward: one block per 32 consecutive slots; its warp w
// turns back and sums rows w, w + warps, ... of its lane's slot, then the
// block adds its warps' sums in warp order into dbias.
// Invariant: every column's sum has the order of the pass without RoPE
// (rows by warp phase, then warps in order), which depends on (N, C) alone,
// with no float atomics, so the bits are those of rope_backward then the sum.
#include <algorithm>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/rope_device.cuh"
#include "model/kernels/row_bias.h"

namespace llm::cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kMaxBlocks = 4096;  // larger matrices loop
constexpr unsigned kWarps = 16;        // backward: row phases per column

// A row's slots: the first rotated_heads heads of D give D - D/2 slots each
// (D/2 pairs, then the odd column if any), the columns after them one each.
struct Slots {
  int C, rotated_heads, D;

  __host__ __device__ int per_head() const { return D - D / 2; }
  __host__ __device__ int count() const { return rotated_heads * (per_head() - D) + C; }
  // Slot j's first column; *pair_index the pair's index in its head (its
  // table column), or -1 when the slot is one column.
  __device__ int column(int j, int* pair_index) const {
    const int rotated = rotated_heads * per_head();
    if (j >= rotated) {
      *pair_index = -1;
      return rotated_heads * D + (j - rotated);
    }
    const int h = j / per_head(), i = j % per_head();
    *pair_index = i < D / 2 ? i : -1;
    return h * D + (i < D / 2 ? i : D - 1);
  }
};

// The pair (lo, hi) rotated by a table row's angle i, sine sign * sin.
__device__ __forceinline__ void rotate_pair(float& lo, float& hi, const float* cos,
                                            const float* sin, int i, float sign) {
  const float sine = sign * sin[i], a = lo, b = hi;
  lo = rope_rotated(a, b, /*second=*/false, cos[i], sine);
  hi = rope_rotated(b, a, /*second=*/true, cos[i], sine);
}

// ---- kernels --------------------------------------------------------------------

template <class T>
__global__ void row_bias_forward_kernel(T* x, const T* bias, int N, Slots slots, RopeAngles rope) {
  const int C = slots.C, half = slots.D / 2, per_row = slots.count();
  const size_t n_items = (size_t)N * per_row, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t item = (size_t)blockIdx.x * blockDim.x + threadIdx.x; item < n_items;
       item += stride) {
    const size_t n = item / per_row;
    int i;
    const int c = slots.column((int)(item % per_row), &i);
    T* row = x + n * C;
    if (i < 0) {
      store_f32(row + c, load_f32(row + c) + load_f32(bias + c));
      continue;
    }
    float lo = stored_value<T>(load_f32(row + c) + load_f32(bias + c));
    float hi = stored_value<T>(load_f32(row + c + half) + load_f32(bias + c + half));
    const size_t angles = rope_row(rope, n, slots.D);
    rotate_pair(lo, hi, rope.cos + angles, rope.sin + angles, i, 1.0f);
    store_f32(row + c, lo);
    store_f32(row + c + half, hi);
  }
}

template <class T>
__global__ void row_bias_backward_kernel(float* dbias, T* dout, int N, Slots slots,
                                         RopeAngles rope) {
  __shared__ float sums[2][kWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int j = blockIdx.x * 32 + lane, C = slots.C, half = slots.D / 2;
  int i = -1, c = 0;
  float sum_lo = 0.0f, sum_hi = 0.0f;
  if (j < slots.count()) {
    c = slots.column(j, &i);
    for (int n = warp; n < N; n += kWarps) {
      T* row = dout + (size_t)n * C;
      if (i < 0) {
        sum_lo += load_f32(row + c);
        continue;
      }
      float lo = load_f32(row + c), hi = load_f32(row + c + half);
      const size_t angles = rope_row(rope, n, slots.D);
      rotate_pair(lo, hi, rope.cos + angles, rope.sin + angles, i, -1.0f);
      store_f32(row + c, lo);
      store_f32(row + c + half, hi);
      sum_lo += stored_value<T>(lo);
      sum_hi += stored_value<T>(hi);
    }
  }
  sums[0][warp][lane] = sum_lo;
  sums[1][warp][lane] = sum_hi;
  __syncthreads();
  if (warp == 0 && j < slots.count()) {
    float total_lo = 0.0f, total_hi = 0.0f;
    for (int w = 0; w < (int)kWarps; w++) {
      total_lo += sums[0][w][lane];
      total_hi += sums[1][w][lane];
    }
    dbias[c] += total_lo;
    if (i >= 0) dbias[c + half] += total_hi;
  }
}

Slots slots_for(int C, int rotated_heads, int D, const RopeAngles& rope) {
  return rope.cos ? Slots{C, rotated_heads, D} : Slots{C, 0, 1};
}

}  // namespace

// ---- launchers ------------------------------------------------------------------

template <class T>
void row_bias_forward(T* x, const T* bias, int N, int C, int rotated_heads, int D,
                      RopeAngles rope) {
  if (N <= 0 || C <= 0) return;
  const Slots slots = slots_for(C, rotated_heads, D, rope);
  const size_t n = (size_t)N * slots.count();
  const unsigned blocks = std::min(blocks_for(n, kThreads), kMaxBlocks);
  launch(row_bias_forward_kernel<T>, blocks, kThreads, 0, compute_stream(), x, bias, N, slots,
         rope);
  LLM_CUDA_CHECK_LAUNCH();
}

template <class T>
void row_bias_backward(float* dbias, T* dout, int N, int C, int rotated_heads, int D,
                       RopeAngles rope) {
  if (N <= 0 || C <= 0) return;
  const Slots slots = slots_for(C, rotated_heads, D, rope);
  launch(row_bias_backward_kernel<T>, blocks_for((size_t)slots.count(), 32), kWarps * 32, 0,
         compute_stream(), dbias, dout, N, slots, rope);
  LLM_CUDA_CHECK_LAUNCH();
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(row_bias_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(row_bias_backward);

}  // namespace llm::cuda
