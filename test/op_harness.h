// The op test harness, in the style of ggml's test-backend-ops: every op of
// the Backend table (model/backend.h) is a case in one table, and each case
// runs on every row it declares of the grid {cpu, cuda} x {f32, bf16}. A case
// writes its body once, over a Backend: it builds host inputs, places them in
// the memory of the backend under test (Buffer, guard elements around), runs
// the op through that backend's op table and compares what comes back with
// the row's oracle:
//   cpu  f32   the double-precision naive reference (test/reference_ops.h):
//              forwards directly, backwards by central finite differences;
//   cpu  bf16  the CPU fp32 twin on the same bf16-exact inputs;
//   cuda f32   the CPU fp32 twin;
//   cuda bf16  the CPU bf16 twin (and, where it says so, the fp32 twin).
// Each comparison names its tolerance, defined with the reason for its size.
// CUDA rows skip with a reason (LLM_SKIP_WITHOUT_GPU) where there is no GPU.
// Invariants: a backend only ever sees pointers into its own memory table; a
// CUDA row never compares CPU against CPU (its oracle runs on backend_cpu(),
// the op under test on backend_cuda()); every entry of LLM_TYPED_OPS and every
// untyped op is exercised on both backends (OpHarness.EveryOpHasCases).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "base/bf16.h"
#include "model/backend.h"
#include "test/gpu_test_support.h"
#include "test/kernel_test_support.h"
#include "test/reference_ops.h"

namespace llm::op_test {

using namespace llm::test_support;
using llm::reference::Vec;
using test_support::to_doubles;

// ---- rows -----------------------------------------------------------------------

enum class Target { cpu, cuda };
enum class Dtype { f32, bf16 };

// One cell of the grid: the backend under test and the storage type.
struct OpRow {
  Target target;
  Dtype dtype;

  bool cpu() const { return target == Target::cpu; }
  bool cuda() const { return target == Target::cuda; }
  // The backend under test; the oracle of a cuda row is always backend_cpu().
  const Backend& backend() const { return cuda() ? backend_cuda() : backend_cpu(); }
};

// Which rows a case has (bits of a mask). Ops with no storage-type variant
// (casts, rope_table, adamw, sum_squares, column_sum_squares, gather_columns,
// the FP8 casts) use the f32 rows, or the bf16 rows for the casts.
enum RowMask : unsigned {
  kCpuF32 = 1,
  kCpuBf16 = 2,
  kCudaF32 = 4,
  kCudaBf16 = 8,
  kCpuRows = kCpuF32 | kCpuBf16,
  kF32Rows = kCpuF32 | kCudaF32,
  kBf16Rows = kCpuBf16 | kCudaBf16,
  kAllRows = kCpuRows | kCudaF32 | kCudaBf16,
};

inline unsigned row_bit(const OpRow& row) {
  const unsigned bit = row.dtype == Dtype::f32 ? kCpuF32 : kCpuBf16;
  return row.cuda() ? bit << 2 : bit;
}

// One check of one op family, e.g. {"rmsnorm", "backward", kAllRows,
// {"rmsnorm_backward"}, body}. `ops` names the Backend entries the body calls
// on the backend under test (checked against the op table for coverage).
struct OpCase {
  std::string family, name;
  unsigned rows;
  std::vector<std::string> ops;
  void (*run)(const OpRow&);
};

// A case body templated over the storage type T (float or Bf16), as the
// function pointer OpCase::run: LLM_BY_DTYPE(rmsnorm_forward).
#define LLM_BY_DTYPE(body)                        \
  [](const ::llm::op_test::OpRow& row) {          \
    if (row.dtype == ::llm::op_test::Dtype::bf16) \
      body<::llm::Bf16>(row);                     \
    else                                          \
      body<float>(row);                           \
  }

// The family tables (one case file each) and their concatenation.
std::vector<OpCase> cast_fill_residual_cases();   // op_cases_elementwise.cpp
std::vector<OpCase> embedding_rmsnorm_cases();    // op_cases_embedding_rmsnorm.cpp
std::vector<OpCase> qk_norm_cases();              // op_cases_qk_norm.cpp
std::vector<OpCase> row_bias_cases();             // op_cases_row_bias.cpp
std::vector<OpCase> rope_swiglu_cases();          // op_cases_rope_swiglu.cpp
std::vector<OpCase> attention_cases();            // op_cases_attention.cpp
std::vector<OpCase> matmul_cases();               // op_cases_matmul.cpp
std::vector<OpCase> cross_entropy_adamw_cases();  // op_cases_loss_adamw.cpp
std::vector<OpCase> columns_cases();              // op_cases_columns.cpp
std::vector<OpCase> kv_cache_cases();             // op_cases_kv_cache.cpp
std::vector<OpCase> fp8_cases();                  // op_cases_fp8.cpp
std::vector<OpCase> fp8_row_amax_cases();         // op_cases_fp8_row_amax.cpp
std::vector<OpCase> fp8_delayed_cases();          // op_cases_fp8_delayed.cpp
const std::vector<OpCase>& op_cases();

// ---- tolerances -----------------------------------------------------------------

// cpu f32 forward against the double reference on identical inputs: each
// output is a short chain (<= ~100 terms) of float operations, each off by at
// most 6e-8 relative, so errors stay near 1e-6; 1e-5 leaves a margin while
// still catching any wrong index, scale or missing term.
inline constexpr Tolerance kForwardTolerance{1e-5, 1e-5};
// cpu f32 backward against finite differences: the difference quotient on the
// double reference is good to ~1e-8 (step 1e-6: truncation ~h^2, rounding
// ~1e-16|L|/h), so the float kernel's rounding dominates; gradients chain more
// float operations than forwards (and are summed over rows), hence 1e-4.
inline constexpr Tolerance kBackwardTolerance{1e-4, 1e-4};
inline constexpr double kFiniteDifferenceStep = 1e-6;
// Two fp32 evaluations of the same short sums in different orders (bf16 vs
// fp32 instantiation on the CPU; GPU vs CPU: another order, fused
// multiply-adds, a 2-ulp exp on each side): a few ulps of sums of <= ~13000
// terms of magnitude <= ~4; 1e-5 relative plus 1e-5 absolute (for results
// that cancel to near 0) bounds that with a wide margin and still catches any
// wrong term, index or scale.
inline constexpr Tolerance kReassociation{1e-5, 1e-5};
// cpu bf16 against the cpu fp32 twin: one round-to-nearest-even to bf16 moves
// a value by at most half an ulp, 2^-8 of its magnitude; on top, the fp32
// result it rounds may itself differ by kReassociation (which can also tip a
// tie the other way: still covered).
inline const Tolerance kOneRounding{kReassociation.abs, std::ldexp(1.0, -8) + kReassociation.rel};
// cuda bf16 against the cpu fp32 twin: the same half ulp, on top of the GPU's
// own fp32 reassociation and the CPU's (twice kReassociation.rel).
inline const Tolerance kOneRoundingAcrossDevices{kReassociation.abs,
                                                 std::ldexp(1.0, -8) + 2 * kReassociation.rel};
// cuda bf16 against the cpu bf16 twin: both are one rounding of fp32 values
// within kReassociation of each other, so where those straddle a rounding
// boundary they land one bf16 ulp apart; an ulp is at most 2^-7 of the
// magnitude (8 significant bits). Twice kOneRounding's half ulp.
inline const Tolerance kOneBf16Ulp{kReassociation.abs,
                                   std::ldexp(1.0, -7) + 2 * kReassociation.rel};

// Two fp32 sums of the same long series in different orders, where the
// terms cancel: the result can be far smaller than its terms, so a bound
// relative to the result (kReassociation) is wrong there. Each addition
// rounds by at most u = 2^-24 of its partial sum; with the rounding errors
// modelled as independent and of mean zero (Higham and Mary, "A new approach
// to probabilistic rounding error analysis", SIAM J. Sci. Comput., 2019), a
// sum whose terms pass through at most `depth` additions is within
// lambda * sqrt(depth) * u * sum|t| of the exact sum with probability at least
// 1 - 2 exp(-lambda^2 / 2): lambda = 6 makes a miss a 3e-8 event per element.
// Two orders each of depth at most `depth` differ by at most twice that.
// Each bound is that plus kReassociation's, for the last few roundings.
inline Doubles reordered_sum_bounds(const Doubles& expected, const Doubles& abs_term_sums,
                                    size_t depth) {
  constexpr double kLambda = 6.0, kUnitRoundoff = 0x1p-24;
  Doubles bound(expected.size());
  for (size_t i = 0; i < bound.size(); i++)
    bound[i] = kReassociation.abs + kReassociation.rel * std::fabs(expected[i]) +
               2 * kLambda * std::sqrt((double)depth) * kUnitRoundoff * abs_term_sums[i];
  return bound;
}

// cuda f32 attention (op_cases_attention.cpp, op_cases_kv_cache.cpp) against
// the CPU twin: the same math in another order (the GPU's tiles or chunks,
// FMAs and warp sums against the CPU's vector blocks) and with another 2-ulp
// exp (exp2f / expf against a Cephes polynomial). A score sums <= 128
// products of inputs in [-2, 2]; its rounding (~1e-5 absolute at worst) moves
// a probability by ~1e-6 relative after the 1/sqrt(D) scale, and each output
// sums at most H/KV * T = 1032 terms whose own roundings stay near 1e-6 of
// their magnitudes. 1e-4 absolute + relative keeps a wide margin over that,
// while one wrong or missing term (about 1/T of an output: >= 3e-3 of it in
// the shapes tested) fails.
inline constexpr Tolerance kCudaAttentionTolerance{1e-4, 1e-4};

// Thread counts compared by the CPU determinism checks; 3 gives uneven splits.
inline constexpr int kThreadCounts[] = {1, 2, 3};

// ---- host data ------------------------------------------------------------------

// Floats uniform in [lo, hi), rounded through bf16 (exact in both precisions).
inline Floats random_bf16_values(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  Floats x = random_floats(n, rng, lo, hi);
  for (float& v : x) v = to_float(to_bf16(v));
  return x;
}

// The first row (C values) scaled by 1/64, exact in bf16 too: for a norm over
// values in [-1, 1], its mean square (~1e-4) is of the order of eps, so eps in
// the wrong place moves rstd by far more than any tolerance.
inline Floats small_first_row(Floats x, int C) {
  for (int c = 0; c < C; c++) x[c] *= 1.0f / 64;
  return x;
}

inline Floats to_floats(const Bf16s& x) {
  Floats out(x.size());
  for (size_t i = 0; i < x.size(); i++) out[i] = to_float(x[i]);
  return out;
}
inline const Floats& to_floats(const Floats& x) { return x; }

// Floats in the storage type T (rounded to nearest even for bf16).
template <class T>
std::vector<T> stored(const Floats& x) {
  if constexpr (std::is_same_v<T, Bf16>)
    return to_bf16s(x);
  else
    return x;
}

// Random values for the storage type T: bf16-exact for every T when
// `bf16_exact` (a bf16 row's fp32 twin must see the same values).
inline Floats random_values(size_t n, std::mt19937& rng, float lo, float hi, bool bf16_exact) {
  return bf16_exact ? random_bf16_values(n, rng, lo, hi) : random_floats(n, rng, lo, hi);
}

template <class T>
std::vector<T> nan_filled(size_t n) {
  return stored<T>(Floats(n, kNaN));
}

inline Doubles to_doubles(const Vec& x) { return x; }

// ---- memory of a backend ----------------------------------------------------------

// Host data placed `offset` elements into memory of `backend` (host memory for
// the CPU, device memory for CUDA), with guard elements of a sentinel pattern
// before it and one after it: offset 1 puts the data off 16-byte alignment
// (allocations themselves are aligned), and the guards catch writes outside
// the range.
template <class T>
class Buffer {
 public:
  Buffer(const Backend& backend, const std::vector<T>& host, size_t offset = 0)
      : memory_(*backend.memory),
        offset_(offset),
        count_(host.size()),
        all_(offset + host.size() + 1),
        base_(static_cast<T*>(memory_.allocate(all_ * sizeof(T)))) {
    std::vector<T> padded(all_, sentinel());
    std::copy(host.begin(), host.end(), padded.begin() + offset_);
    memory_.to_device(base_, padded.data(), all_ * sizeof(T));
  }
  ~Buffer() { memory_.release(base_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* get() const { return base_ + offset_; }
  size_t size() const { return count_; }
  // Waits for queued work (copies are ordered with the kernels) and reads back.
  std::vector<T> download() const {
    std::vector<T> host(count_);
    memory_.to_host(host.data(), get(), count_ * sizeof(T));
    return host;
  }
  void upload(const std::vector<T>& host) {
    EXPECT_EQ(host.size(), count_);
    memory_.to_device(get(), host.data(), count_ * sizeof(T));
  }
  bool guards_intact() const {
    std::vector<T> all(all_);
    memory_.to_host(all.data(), base_, all_ * sizeof(T));
    for (size_t i = 0; i < all_; i++) {
      if (i >= offset_ && i < offset_ + count_) continue;
      if (std::memcmp(&all[i], &sentinel(), sizeof(T)) != 0) return false;
    }
    return true;
  }

 private:
  static const T& sentinel() {
    static const T value = [] {
      T v;
      std::memset(&v, 0x7F, sizeof v);  // a huge finite value in fp32 and bf16
      return v;
    }();
    return value;
  }

  const DeviceMemory& memory_;
  size_t offset_, count_, all_;
  T* base_;
};

// Buffer offsets a row runs: the CUDA kernels choose vector or element-wise
// paths by alignment, so their rows run aligned and one element off; the CPU
// kernels have one path, and run aligned.
inline std::vector<size_t> offsets_for(const OpRow& row) {
  return row.cuda() ? std::vector<size_t>{0, 1} : std::vector<size_t>{0};
}

// The shapes a row runs: a case's cuda table on cuda rows, its cpu table on
// cpu rows (the CPU oracles are slower, so the cpu tables are smaller).
template <class Shape, size_t kCpu, size_t kCuda>
std::vector<Shape> shapes_for(const OpRow& row, const Shape (&cpu)[kCpu],
                              const Shape (&cuda)[kCuda]) {
  if (row.cuda()) return {std::begin(cuda), std::end(cuda)};
  return {std::begin(cpu), std::end(cpu)};
}

// ---- comparisons ----------------------------------------------------------------

// |actual[i] - expected[i]| <= bound[i] for every i (NaN fails); reports the
// count of misses, the first few and the worst.
inline void expect_within(const Doubles& actual, const Doubles& expected, const Doubles& bound,
                          const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  ASSERT_EQ(bound.size(), expected.size()) << what;
  size_t misses = 0, worst = 0;
  double worst_excess = -INFINITY;
  for (size_t i = 0; i < actual.size(); i++) {
    const double error = std::fabs(actual[i] - expected[i]);
    const double excess = std::isnan(error) ? INFINITY : error - bound[i];
    if (excess > worst_excess) worst_excess = excess, worst = i;
    if (excess <= 0) continue;
    if (++misses <= 5)
      ADD_FAILURE() << what << "[" << i << "]: actual " << actual[i] << " expected " << expected[i]
                    << " differ by " << error << " > " << bound[i];
  }
  EXPECT_EQ(misses, 0u) << what << ": elements out of tolerance, worst at [" << worst << "]";
}

// abs + rel * |expected| elementwise.
template <class A, class E>
void expect_close(const std::vector<A>& actual, const std::vector<E>& expected, Tolerance tol,
                  const std::string& what) {
  const Doubles e = to_doubles(expected);
  expect_within(to_doubles(actual), e, tolerance_bounds(e, tol), what);
}

// A cuda row's output against its CPU twins on the same inputs: in bf16
// within one rounding of the fp32 twin and one bf16 ulp of the bf16 twin; in
// fp32 within kReassociation of the fp32 twin (then storage_twin is that too).
template <class T, class S>
void expect_matches_cpu_twins(const std::vector<T>& actual, const Floats& fp32_twin,
                              const std::vector<S>& storage_twin, const std::string& what) {
  if constexpr (std::is_same_v<T, Bf16>) {
    expect_close(actual, fp32_twin, kOneRoundingAcrossDevices, "bf16 " + what + " vs fp32 twin");
    expect_close(actual, storage_twin, kOneBf16Ulp, "bf16 " + what + " vs bf16 twin");
  } else {
    expect_close(actual, fp32_twin, kReassociation, "fp32 " + what);
  }
}

// The same bits, element by element; reports the count and the first few.
template <class T>
void expect_identical(const std::vector<T>& actual, const std::vector<T>& expected,
                      const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t misses = 0;
  for (size_t i = 0; i < actual.size(); i++) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(T)) == 0) continue;
    if (++misses <= 5)
      ADD_FAILURE() << what << "[" << i << "]: " << to_float(actual[i]) << " vs "
                    << to_float(expected[i]) << " (bits differ)";
  }
  EXPECT_EQ(misses, 0u) << what << ": elements with different bits";
}

// actual == to_bf16(fp32) bit for bit: the fp32 math rounded once at the store.
inline void expect_rounded_once(const Bf16s& actual, const Floats& fp32, const std::string& what) {
  expect_identical(actual, to_bf16s(fp32), what + " (fp32 rounded once)");
}

// The bf16 output of an op whose math is the fp32 twin's up to the final store
// is to_bf16 of it; an fp32 output is the same bits.
template <class T>
void expect_fp32_rounded(const std::vector<T>& actual, const Floats& fp32,
                         const std::string& what) {
  if constexpr (std::is_same_v<T, Bf16>)
    expect_rounded_once(actual, fp32, what);
  else
    expect_identical(actual, fp32, what);
}

inline void expect_all_finite(const Doubles& x, const std::string& what) {
  for (size_t i = 0; i < x.size(); i++)
    if (!std::isfinite(x[i])) {
      ADD_FAILURE() << what << "[" << i << "] = " << x[i];
      return;
    }
}

// Determinism of f() (returning Floats): on the CPU the bits are the same at
// 1, 2 and 3 OpenMP threads (so also on a repeat); on CUDA a repeat gives the
// same bits.
template <class F>
void expect_repeatable(const OpRow& row, F f, const std::string& what) {
  if (row.cuda()) {
    const Floats first = f();
    expect_identical(f(), first, what + ", second run");
    return;
  }
  const Floats first = with_threads(1, f);
  for (int threads : kThreadCounts)
    expect_identical(with_threads(threads, f), first,
                     what + ", threads " + std::to_string(threads));
}

inline void append(Floats& out, const Floats& x) { out.insert(out.end(), x.begin(), x.end()); }

// ---- finite differences -----------------------------------------------------------

using Function = std::function<Vec(const Vec&)>;

inline double projection(const Vec& dout, const Vec& y) {
  double sum = 0.0;
  for (size_t i = 0; i < y.size(); i++) sum += dout[i] * y[i];
  return sum;
}

// d/dx_i of L = sum(dout * f(x)) by central differences, for each i in indices:
// (L(x + h e_i) - L(x - h e_i)) / 2h, one forward pair per input.
inline Vec finite_difference_gradient(const Function& f, const Vec& x, const Vec& dout,
                                      const std::vector<size_t>& indices) {
  Vec grad(indices.size()), shifted = x;
  for (size_t k = 0; k < indices.size(); k++) {
    const size_t i = indices[k];
    shifted[i] = x[i] + kFiniteDifferenceStep;
    const double plus = projection(dout, f(shifted));
    shifted[i] = x[i] - kFiniteDifferenceStep;
    const double minus = projection(dout, f(shifted));
    shifted[i] = x[i];
    grad[k] = (plus - minus) / (2 * kFiniteDifferenceStep);
  }
  return grad;
}

// The full gradient d/dx of sum(dout * f(x)).
inline Vec finite_difference_gradient(const Function& f, const Vec& x, const Vec& dout) {
  std::vector<size_t> indices(x.size());
  for (size_t i = 0; i < x.size(); i++) indices[i] = i;
  return finite_difference_gradient(f, x, dout, indices);
}

inline Vec add(const Vec& a, const Vec& b) { return reference::residual_forward(a, b); }

}  // namespace llm::op_test
