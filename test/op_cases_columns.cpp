// Op cases of ZenFlow's per-column selection (model/kernels/columns.h):
// column_sum_squares and gather_columns (fp32 rows) and scatter_columns (every
// row), see op_harness.h. Each runs on the touched rows of a matrix, the held
// slice [lo, hi) inside them and poison (NaN, or a sentinel for scatter)
// around it, over geometries whose slice starts and ends mid-row, covers
// whole rows, lies within one row or is one element, with k = 1, some and
// all columns, selected in shuffled order.
// Invariant: an op reads only held elements (the NaN around them would show),
// writes only held elements of selected columns (the sentinel must survive
// everywhere else), and gather then scatter gives the slice back.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "test/op_harness.h"

namespace llm::op_test {
namespace {

struct Geometry {
  size_t lo, hi, cols;
};
constexpr Geometry kGeometries[] = {
    {5, 40, 7},         // starts and ends mid-row (rows 0..5)
    {0, 42, 7},         // exactly rows 0..5
    {16, 20, 7},        // inside row 2
    {10, 11, 7},        // one element
    {1000, 5000, 300},  // mid-row; 300 columns: two CPU column blocks, one ragged
    {1000, 2048 * 600 - 5,
     2048},  // 600 rows, > 1M compact elements at k = 2048: the GPU grid loops
};

constexpr float kScatterSentinel = 1000.0f;  // exact in bf16; never a compact value here

// The held elements' column sums are a double sum rounded once to float: at
// most half an fp32 ulp (2^-24 relative) from the exact sum, which the naive
// double reference matches to ~1e-16. Every term is >= 0 (out starts in
// [0, 1)), so a relative bound is meaningful: one fp32 ulp (2^-23).
constexpr Tolerance kOneFloatRounding{0.0, 0x1p-23};

size_t first_row(const Geometry& g) { return g.lo / g.cols; }
size_t compact_rows(const Geometry& g) { return columns_compact_rows(g.lo, g.hi, g.cols); }
// Where the slice starts in the touched rows.
size_t slice_offset(const Geometry& g) { return g.lo - first_row(g) * g.cols; }
bool held(const Geometry& g, size_t e) { return e >= g.lo && e < g.hi; }

// The touched rows (compact_rows * cols elements): the slice `held_values`
// (hi - lo) at slice_offset, `outside` elsewhere.
template <class T>
std::vector<T> touched_rows(const Geometry& g, const std::vector<T>& held_values, T outside) {
  std::vector<T> rows(compact_rows(g) * g.cols, outside);
  std::copy(held_values.begin(), held_values.end(), rows.begin() + slice_offset(g));
  return rows;
}

// k distinct columns of cols in shuffled order (never ascending when k > 1).
Ints random_selection(size_t cols, size_t k, std::mt19937& rng) {
  Ints all(cols);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(k);
  if (k > 1 && std::is_sorted(all.begin(), all.end())) std::reverse(all.begin(), all.end());
  return all;
}

// The selections a geometry runs: one column, about half of them, all.
std::vector<Ints> selections_for(const Geometry& g, std::mt19937& rng) {
  return {random_selection(g.cols, 1, rng), random_selection(g.cols, g.cols / 2 + 1, rng),
          random_selection(g.cols, g.cols, rng)};
}

// ---- naive references -------------------------------------------------------------

Doubles reference_column_sum_squares(const Geometry& g, const Floats& slice, const Floats& out) {
  Doubles sums = to_doubles(out);
  for (size_t e = g.lo; e < g.hi; e++)
    sums[e % g.cols] += (double)slice[e - g.lo] * slice[e - g.lo];
  return sums;
}

Floats reference_gather(const Geometry& g, const Floats& slice, const Ints& selected) {
  const size_t k = selected.size();
  Floats compact(compact_rows(g) * k);
  for (size_t i = 0; i < compact_rows(g); i++)
    for (size_t j = 0; j < k; j++) {
      const size_t e = (first_row(g) + i) * g.cols + selected[j];
      compact[i * k + j] = held(g, e) ? slice[e - g.lo] : 0.0f;
    }
  return compact;
}

// The touched rows after scattering `compact` (already in T) onto rows that
// hold `fill`: each held element of a selected column is its compact entry.
template <class T>
std::vector<T> reference_scatter(const Geometry& g, const std::vector<T>& compact,
                                 const Ints& selected, T fill) {
  const size_t k = selected.size();
  std::vector<T> rows(compact_rows(g) * g.cols, fill);
  for (size_t i = 0; i < compact_rows(g); i++)
    for (size_t j = 0; j < k; j++) {
      const size_t e = (first_row(g) + i) * g.cols + selected[j];
      if (held(g, e)) rows[e - first_row(g) * g.cols] = compact[i * k + j];
    }
  return rows;
}

// ---- the ops on a backend ---------------------------------------------------------

Floats run_column_sum_squares(const Backend& be, const Geometry& g, const Floats& rows,
                              const Floats& out) {
  Buffer<float> d_rows(be, rows), d_out(be, out);
  be.column_sum_squares(d_out.get(), d_rows.get() + slice_offset(g), g.lo, g.hi, g.cols);
  EXPECT_TRUE(d_out.guards_intact());
  return d_out.download();
}

Floats run_gather(const Backend& be, const Geometry& g, const Floats& rows, const Ints& selected) {
  Buffer<float> d_rows(be, rows), d_compact(be, Floats(compact_rows(g) * selected.size(), kNaN));
  Buffer<int32_t> d_selected(be, selected);
  be.gather_columns(d_compact.get(), d_rows.get() + slice_offset(g), g.lo, g.hi, g.cols,
                    d_selected.get(), selected.size());
  EXPECT_TRUE(d_compact.guards_intact());
  return d_compact.download();
}

template <class T>
std::vector<T> run_scatter(const Backend& be, const Geometry& g, const std::vector<T>& rows,
                           const Floats& compact, const Ints& selected) {
  Buffer<T> d_rows(be, rows);
  Buffer<float> d_compact(be, compact);
  Buffer<int32_t> d_selected(be, selected);
  be.ops<T>().scatter_columns(d_rows.get() + slice_offset(g), d_compact.get(), g.lo, g.hi, g.cols,
                              d_selected.get(), selected.size());
  EXPECT_TRUE(d_rows.guards_intact());
  return d_rows.download();
}

std::string describe(const Geometry& g) {
  return "lo=" + std::to_string(g.lo) + " hi=" + std::to_string(g.hi) +
         " cols=" + std::to_string(g.cols);
}
std::string describe(const Geometry& g, const Ints& selected) {
  return describe(g) + " k=" + std::to_string(selected.size());
}

// ---- cases ------------------------------------------------------------------------

// out += column sums of squares, from out in [0, 1), with NaN around the
// slice. Random values: cpu within kOneFloatRounding of the double reference
// and the same bits at 1, 2 and 3 threads. Multiples of 1/16 in [-4, 4]
// (squares multiples of 2^-8 up to 16, column sums below 2^14: exact in
// float): cpu exactly the reference. cuda: the CPU twin's bits (the same
// double additions in the same order, one rounding) and the same on a repeat.
void column_sum_squares(const OpRow& row) {
  std::mt19937 rng(row.cuda() ? 511 : 510);
  std::uniform_int_distribution<int> sixteenths(-64, 64);
  for (const Geometry& g : kGeometries) {
    for (bool exact : {false, true}) {
      SCOPED_TRACE(describe(g) + (exact ? " exact inputs" : " random inputs"));
      Floats slice = random_floats(g.hi - g.lo, rng, -2.0f, 2.0f);
      Floats out = random_floats(g.cols, rng, 0.0f, 1.0f);
      if (exact) {
        for (float& v : slice) v = sixteenths(rng) / 16.0f;
        for (float& v : out) v = std::floor(v * 16.0f) / 16.0f;
      }
      const Floats rows = touched_rows(g, slice, kNaN);
      auto run = [&] { return run_column_sum_squares(row.backend(), g, rows, out); };
      const Floats sums = run();
      expect_repeatable(row, run, "column sums");
      if (row.cuda()) {
        expect_identical(sums, run_column_sum_squares(backend_cpu(), g, rows, out), "vs CPU twin");
      } else if (exact) {
        const Doubles reference = reference_column_sum_squares(g, slice, out);
        expect_identical(sums, Floats(reference.begin(), reference.end()), "exact sums");
      } else {
        expect_close(sums, reference_column_sum_squares(g, slice, out), kOneFloatRounding, "sums");
      }
    }
  }
}

// compact (starting NaN) = the selected held elements, 0 where not held (NaN
// around the slice, so a read there would show): the reference's bits on cpu,
// the CPU twin's on cuda.
void gather_columns(const OpRow& row) {
  std::mt19937 rng(row.cuda() ? 521 : 520);
  for (const Geometry& g : kGeometries) {
    const Floats slice = random_floats(g.hi - g.lo, rng, 1.0f, 2.0f);  // never 0
    const Floats rows = touched_rows(g, slice, kNaN);
    for (const Ints& selected : selections_for(g, rng)) {
      SCOPED_TRACE(describe(g, selected));
      const Floats compact = run_gather(row.backend(), g, rows, selected);
      const Floats expected = row.cuda() ? run_gather(backend_cpu(), g, rows, selected)
                                         : reference_gather(g, slice, selected);
      expect_identical(compact, expected, "compact");
    }
  }
}

// Random fp32 compact values onto touched rows all holding kScatterSentinel:
// every held element of a selected column becomes its compact entry (bf16:
// the bits of the backend's cast_f32_to_bf16 of the compact buffer), every
// other element (unselected columns, the rows outside [lo, hi)) keeps the
// sentinel; cuda: also the CPU twin's bits.
template <class T>
void scatter_columns(const OpRow& row) {
  std::mt19937 rng(row.cuda() ? 531 : 530);
  const Backend& be = row.backend();
  const T sentinel = stored<T>({kScatterSentinel})[0];
  for (const Geometry& g : kGeometries) {
    const std::vector<T> rows(compact_rows(g) * g.cols, sentinel);
    for (const Ints& selected : selections_for(g, rng)) {
      SCOPED_TRACE(describe(g, selected));
      const Floats compact = random_floats(compact_rows(g) * selected.size(), rng);
      std::vector<T> compact_in_t;
      if constexpr (std::is_same_v<T, Bf16>) {
        Buffer<float> d_compact(be, compact);
        Buffer<Bf16> d_cast(be, Bf16s(compact.size()));
        be.cast_f32_to_bf16(d_cast.get(), d_compact.get(), compact.size());
        compact_in_t = d_cast.download();
      } else {
        compact_in_t = compact;
      }
      const std::vector<T> after = run_scatter<T>(be, g, rows, compact, selected);
      expect_identical(after, reference_scatter(g, compact_in_t, selected, sentinel), "rows");
      if (row.cuda())
        expect_identical(after, run_scatter<T>(backend_cpu(), g, rows, compact, selected),
                         "vs CPU twin");
    }
  }
}

// gather from the slice, then scatter the compact buffer onto rows holding
// kScatterSentinel: the selected held elements come back with their bits (the
// values are bf16-exact, so also through bf16 storage), all else keeps the
// sentinel; with k = cols the whole slice comes back.
template <class T>
void gather_then_scatter(const OpRow& row) {
  std::mt19937 rng(row.cuda() ? 541 : 540);
  const Backend& be = row.backend();
  const T sentinel = stored<T>({kScatterSentinel})[0];
  for (const Geometry& g : kGeometries) {
    const Floats slice = random_bf16_values(g.hi - g.lo, rng);
    const Floats rows = touched_rows(g, slice, kNaN);
    for (const Ints& selected : selections_for(g, rng)) {
      SCOPED_TRACE(describe(g, selected));
      const Floats compact = run_gather(be, g, rows, selected);
      const std::vector<T> after =
          run_scatter<T>(be, g, std::vector<T>(rows.size(), sentinel), compact, selected);
      const Floats reference_compact = reference_gather(g, slice, selected);
      expect_identical(after,
                       reference_scatter(g, stored<T>(reference_compact), selected, sentinel),
                       "rows after the round trip");
      if (selected.size() == g.cols)
        expect_identical(after, touched_rows(g, stored<T>(slice), sentinel), "the whole slice");
    }
  }
}

}  // namespace

std::vector<OpCase> columns_cases() {
  return {
      {"columns", "sum_squares_in_row_order", kF32Rows, {"column_sum_squares"}, column_sum_squares},
      {"columns", "gather_zero_where_not_held", kF32Rows, {"gather_columns"}, gather_columns},
      {"columns",
       "scatter_writes_only_held_selected",
       kAllRows,
       {"scatter_columns", "cast_f32_to_bf16"},
       LLM_BY_DTYPE(scatter_columns)},
      {"columns",
       "gather_then_scatter_round_trips",
       kAllRows,
       {"gather_columns", "scatter_columns"},
       LLM_BY_DTYPE(gather_then_scatter)},
  };
}

}  // namespace llm::op_test
