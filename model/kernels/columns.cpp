// ZenFlow's per-column selection on the CPU: column squared norms, and the
// gather / scatter of selected columns between a held slice and its compact
// buffer.
// Invariant: column_sum_squares gives each column to one thread, which adds
// its squares by increasing row (the CUDA twin's order), so the bits do not
// depend on the thread count; gather and scatter are elementwise over the
// compact buffer and selected columns are distinct, so no element is written
// twice.
#include "model/kernels/columns.h"

#include <algorithm>

namespace llm::cpu {

namespace {

// Columns per task of column_sum_squares: their double sums stay in cache
// while the task reads its part of each row contiguously.
constexpr size_t kColumnBlock = 256;

// f(i, e) for every compact index i in [0, rows * k), e its flat element
// (possibly outside [lo, hi)), rows in parallel.
template <class F>
void for_each_compact(size_t lo, size_t hi, size_t cols, const int32_t* selected, size_t k, F f) {
  const size_t first_row = lo / cols, rows = columns_compact_rows(lo, hi, cols);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < k; j++) f(i * k + j, (first_row + i) * cols + (size_t)selected[j]);
}

}  // namespace

void column_sum_squares(float* out, const float* slice, size_t lo, size_t hi, size_t cols) {
  const size_t first_row = lo / cols, last_row = (hi - 1) / cols;
  const size_t n_blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (size_t block = 0; block < n_blocks; block++) {
    const size_t c0 = block * kColumnBlock, c1 = std::min(c0 + kColumnBlock, cols);
    double sums[kColumnBlock] = {};
    for (size_t r = first_row; r <= last_row; r++) {
      // The held columns of row r: [lo, hi) cut to the row (r <= last_row, so hi > row_start).
      const size_t row_start = r * cols;
      const size_t begin = std::max(c0, lo > row_start ? lo - row_start : 0);
      const size_t end = std::min(c1, hi - row_start);
      for (size_t c = begin; c < end; c++) {
        const double x = slice[row_start + c - lo];
        sums[c - c0] += x * x;
      }
    }
    for (size_t c = c0; c < c1; c++) out[c] = (float)(out[c] + sums[c - c0]);
  }
}

void gather_columns(float* compact, const float* slice, size_t lo, size_t hi, size_t cols,
                    const int32_t* selected, size_t k) {
  for_each_compact(lo, hi, cols, selected, k, [&](size_t i, size_t e) {
    compact[i] = e >= lo && e < hi ? slice[e - lo] : 0.0f;
  });
}

template <class T>
void scatter_columns(T* slice, const float* compact, size_t lo, size_t hi, size_t cols,
                     const int32_t* selected, size_t k) {
  for_each_compact(lo, hi, cols, selected, k, [&](size_t i, size_t e) {
    if (e >= lo && e < hi) store(slice + (e - lo), compact[i]);
  });
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(scatter_columns);

}  // namespace llm::cpu
