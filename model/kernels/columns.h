// ZenFlow's per-column selection on the slice of a row-major weight matrix a
// caller holds: the squared norm of every column (to rank the columns), and
// the move of chosen columns between the slice and a compact buffer that the
// optimizer updates on the device.
// Geometry: the matrix has `cols` columns; the caller holds its flat elements
// [lo, hi), hi > lo, contiguously in `slice` (slice[e - lo] is element e), so
// it touches rows lo / cols .. (hi - 1) / cols, columns_compact_rows of them.
// A selection is k distinct column indices selected[0..k), in any order, in
// the backend's memory; its compact buffer is (rows, k):
// compact[(r - lo / cols) * k + j] is element r * cols + selected[j].
// Invariants: column_sum_squares adds each column's squares in double in
// increasing row order and rounds once into out, on every backend and at any
// thread count (the same bits everywhere); gather writes 0 where the element
// is not held; scatter writes only held elements of selected columns (bf16
// rounded to nearest even, as cast_f32_to_bf16), so a gather then a scatter
// gives back the slice.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/storage_types.h"

namespace llm {

// Rows of the matrix that the held elements [lo, hi) touch (hi > lo).
inline size_t columns_compact_rows(size_t lo, size_t hi, size_t cols) {
  return (hi - 1) / cols - lo / cols + 1;
}

}  // namespace llm

namespace llm::cpu {

// out (cols) += for each column c the sum of slice[e - lo]^2 over the held
// elements e with e % cols == c: summed in double by increasing row, then
// added to out[c] with one rounding to float.
void column_sum_squares(float* out, const float* slice, size_t lo, size_t hi, size_t cols);

// compact (rows, k) = the held elements of the selected columns, 0 where the
// element r * cols + selected[j] is outside [lo, hi).
void gather_columns(float* compact, const float* slice, size_t lo, size_t hi, size_t cols,
                    const int32_t* selected, size_t k);

// The reverse of gather_columns on held elements only: slice[e - lo] =
// compact entry of e (in T's storage); compact entries outside [lo, hi) are
// ignored, elements of unselected columns are left as they are.
template <class T>
void scatter_columns(T* slice, const float* compact, size_t lo, size_t hi, size_t cols,
                     const int32_t* selected, size_t k);

}  // namespace llm::cpu

// CUDA twins (columns.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

void column_sum_squares(float* out, const float* slice, size_t lo, size_t hi, size_t cols);
void gather_columns(float* compact, const float* slice, size_t lo, size_t hi, size_t cols,
                    const int32_t* selected, size_t k);
template <class T>
void scatter_columns(T* slice, const float* compact, size_t lo, size_t hi, size_t cols,
                     const int32_t* selected, size_t k);

}  // namespace llm::cuda
