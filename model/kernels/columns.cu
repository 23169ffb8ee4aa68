// ZenFlow's per-column selection on the GPU. column_sum_squares: one thread
// per column walks the rows in increasing order, so at each row the threads
// of a warp read consecutive elements (coalesced). gather / scatter: one
// thread per compact element, grid-stride.
// Invariant: each column's squares (exact in double) are added in double by
// increasing row from 0 and rounded once into out, the CPU twin's order, so
// both give the same bits; selected columns are distinct, so no element is
// written by two threads; bf16 stores round to nearest even (store_f32, as
// cast_f32_to_bf16). Nothing waits for the host.
#include <algorithm>

#include "device/cuda_kernel_helpers.cuh"
#include "device/cuda_runtime.cuh"
#include "model/kernels/columns.h"

namespace llm::cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kMaxBlocks = 4096;  // gather / scatter of larger buffers loop

// ---- kernels --------------------------------------------------------------------

// out[c] += the squares of column c's held elements, by increasing row.
__global__ void column_sum_squares_kernel(float* out, const float* slice, size_t lo, size_t hi,
                                          size_t cols, size_t first_row, size_t last_row) {
  const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double sum = 0.0;
  for (size_t r = first_row; r <= last_row; r++) {
    const size_t e = r * cols + c;
    if (e < lo || e >= hi) continue;
    const double x = slice[e - lo];
    sum += x * x;
  }
  out[c] = (float)(out[c] + sum);
}

// The flat element compact entry i stands for (possibly outside [lo, hi)).
__device__ size_t compact_element(size_t i, size_t cols, const int32_t* selected, size_t k,
                                  size_t first_row) {
  return (first_row + i / k) * cols + (size_t)selected[i % k];
}

// compact[i] = element compact_element(i), 0 when not held.
__global__ void gather_columns_kernel(float* compact, const float* slice, size_t lo, size_t hi,
                                      size_t cols, const int32_t* selected, size_t k,
                                      size_t first_row, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const size_t e = compact_element(i, cols, selected, k, first_row);
    compact[i] = e >= lo && e < hi ? slice[e - lo] : 0.0f;
  }
}

// The reverse of gather_columns_kernel on held elements only.
template <class T>
__global__ void scatter_columns_kernel(T* slice, const float* compact, size_t lo, size_t hi,
                                       size_t cols, const int32_t* selected, size_t k,
                                       size_t first_row, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const size_t e = compact_element(i, cols, selected, k, first_row);
    if (e >= lo && e < hi) store_f32(slice + (e - lo), compact[i]);
  }
}

// ---- launchers ------------------------------------------------------------------

// Blocks for the n elements of a compact buffer.
unsigned compact_blocks(size_t n) { return std::min(blocks_for(n, kThreads), kMaxBlocks); }

}  // namespace

void column_sum_squares(float* out, const float* slice, size_t lo, size_t hi, size_t cols) {
  launch(column_sum_squares_kernel, blocks_for(cols, kThreads), kThreads, 0, compute_stream(), out,
         slice, lo, hi, cols, lo / cols, (hi - 1) / cols);
  LLM_CUDA_CHECK_LAUNCH();
}

void gather_columns(float* compact, const float* slice, size_t lo, size_t hi, size_t cols,
                    const int32_t* selected, size_t k) {
  const size_t n = columns_compact_rows(lo, hi, cols) * k;
  if (n == 0) return;
  launch(gather_columns_kernel, compact_blocks(n), kThreads, 0, compute_stream(), compact, slice,
         lo, hi, cols, selected, k, lo / cols, n);
  LLM_CUDA_CHECK_LAUNCH();
}

template <class T>
void scatter_columns(T* slice, const float* compact, size_t lo, size_t hi, size_t cols,
                     const int32_t* selected, size_t k) {
  const size_t n = columns_compact_rows(lo, hi, cols) * k;
  if (n == 0) return;
  launch(scatter_columns_kernel<T>, compact_blocks(n), kThreads, 0, compute_stream(), slice,
         compact, lo, hi, cols, selected, k, lo / cols, n);
  LLM_CUDA_CHECK_LAUNCH();
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(scatter_columns);

}  // namespace llm::cuda
