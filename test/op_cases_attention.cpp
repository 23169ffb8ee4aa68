// Op cases of causal GQA attention (forward: out and lse; backward: dqkv from
// dout, qkv, out and lse) on every row (see op_harness.h): forward against the
// reference, backward against finite differences (cpu f32, sampled on large
// shapes), the fp32 twin (cpu bf16) or the CPU twin (cuda); determinism and
// overwriting; an unsupported CUDA head dim is an error naming it. cuda bf16
// rows run each case on both GPU kernels: the hand-written flash kernel and
// (in a cuDNN build) cuDNN's fused attention, against the same oracle and
// bounds, and check that cuDNN itself ran on the head dims the model configs
// use (multiples of 64) rather than falling back to the flash kernel.
// Invariant: backward always gets the CPU forward's out and lse as input, so
// only the backward is compared; outputs are pre-filled with NaN, which fails
// every comparison unless overwritten. The CUDA bf16 bound adds, element by
// element, the effect of rounding P and dS to bf16 before the tensor-core
// products (the CPU keeps them fp32), from a double recomputation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/cudnn/attention_cudnn.h"
#include "test/op_harness.h"

namespace llm::op_test {
namespace {

// One GPU attention kernel under test (or, on other rows, the row's backend).
struct KernelUnderTest {
  const char* name;
  const Backend* backend;
  bool cudnn;

  // Calls of the cuDNN entry points that ran the flash kernel instead, so far.
  static size_t fallbacks() { return cudnn::attention_fallback_calls(); }
  // cuDNN ran every call since `before` on a shape whose head dim the model
  // configs use; other shapes may fall back (still checked for correctness).
  void expect_ran(const AttentionShape& s, size_t before) const {
    if (cudnn && s.D % 64 == 0) {
      EXPECT_EQ(fallbacks(), before) << "cuDNN fell back to the flash kernel";
    }
  }
};

std::vector<KernelUnderTest> kernels_of(const OpRow& row) {
  if (!row.cuda() || row.dtype != Dtype::bf16) return {{"row backend", &row.backend(), false}};
  std::vector<KernelUnderTest> kernels = {{"flash", &backend_cuda(AttentionKernel::flash), false}};
  if (kBuiltWithCudnn) kernels.push_back({"cudnn", &backend_cuda(AttentionKernel::cudnn), true});
  return kernels;
}

// Runs body(row, kernel) for each kernel of the row.
template <class Body>
void on_each_kernel(const OpRow& row, Body body) {
  for (const KernelUnderTest& kernel : kernels_of(row)) {
    SCOPED_TRACE(kernel.name);
    body(row, kernel);
  }
}

// cpu rows: grouped query, H == KV (multi-head), KV == 1 (multi-query) with an
// odd D, T == 1; small enough for finite differences.
constexpr AttentionShape kCpuShapes[] = {
    {2, 5, 4, 2, 6}, {1, 6, 3, 3, 4}, {2, 4, 4, 1, 5}, {3, 1, 2, 1, 8}};
// The CPU kernel tiles 64 queries x 64 keys, cuts the diagonal tile into
// chunks of 16 queries, and its tile GEMM blocks rows by 6 or 8 and D by two
// vectors, one vector and single floats: these span several tiles, a partial
// last tile (130 = 2 x 64 + 2: a chunk of 2 rows) and every D block (123 =
// 3 x 32 + 16 + 11 with 16-float vectors, 7 x 16 + 8 + 3 with 8-float ones).
constexpr AttentionShape kCpuLargeShapes[] = {{1, 130, 4, 2, 64}, {1, 70, 2, 1, 123}};
// cuda rows: the kernels tile 32 or 64 queries x 32 or 64 keys and pad the
// head dim to 16, 32, 64 or 128: T == 1, partial last tiles (17, 33, 40, 70,
// 129), whole tiles (256), grouped, multi-head and multi-query heads, every
// padded head dim, and head dims that are not whole 16-byte packs of bf16 (24)
// or of either type (5), which take the element-wise load path.
constexpr AttentionShape kCudaShapes[] = {
    {1, 1, 2, 1, 32},     // T == 1: one key
    {2, 17, 4, 2, 64},    // one partial tile, groups of 2 query heads
    {1, 70, 4, 4, 64},    // multi-head (H == KV), a whole and a partial tile
    {2, 129, 8, 2, 128},  // D = 128 (the smaller fp32 tiles), groups of 4
    {1, 256, 2, 1, 64},   // multi-query, whole tiles only
    {2, 33, 4, 2, 16},    // D = 16, as configs/tiny.toml
    {1, 40, 3, 1, 24},    // D padded to 32
    {2, 9, 2, 2, 5},      // odd D
};

// cuda f32: kCudaAttentionTolerance (op_harness.h). lse is fp32 in both
// precisions and the GPU sums the unrounded P for it: that bound holds for
// lse in bf16 too.
// cuda bf16: everything kCudaAttentionTolerance allows, plus
//  - the GPU rounds P (in out = P V / l and dV = P^T dO) and dS (in dQ = dS K
//    and dK = dS^T Q) to bf16 before multiplying: each rounded factor moves by
//    at most half an ulp, 2^-8 of itself, so a result moves by at most 2^-8
//    times the sum of |terms| of its product (rounded_term_magnitudes);
//  - each side rounds its fp32 result to bf16 once: two results that differ as
//    above may land on either side of a rounding boundary, at most one bf16
//    ulp of the result apart; a second ulp is margin.
constexpr double kBf16Ulp = 0x1p-7;       // bf16 ulp of 1: 8 significant bits
constexpr double kBf16Rounding = 0x1p-8;  // round to nearest: half an ulp, relative

size_t qkv_size(const AttentionShape& s) { return (size_t)s.B * s.T * (s.H + 2 * s.KV) * s.D; }
size_t out_size(const AttentionShape& s) { return (size_t)s.B * s.T * s.H * s.D; }
size_t lse_size(const AttentionShape& s) { return (size_t)s.B * s.H * s.T; }

// Per output element, the sum of |terms| of the product in which the GPU's
// bf16 path rounds a factor: out_t = sum_s p_ts v_s (p rounded), dq_t =
// sum_s ds_ts k_s, dk_s = sum_{h,t} ds_ts q_t (ds rounded), dv_s =
// sum_{h,t} p_ts dout_t (p rounded), with p and ds = p (dout_t . v_s - delta_t)
// / sqrt(D) recomputed in double; delta_t = dout_t . out_t from the out both
// backwards get. out has the layout of out, dqkv that of qkv.
struct RoundedTermMagnitudes {
  Doubles out, dqkv;
};

RoundedTermMagnitudes rounded_term_magnitudes(const Doubles& qkv, const Doubles& dout,
                                              const Doubles& out, const AttentionShape& shape) {
  const auto [B, T, H, KV, D] = shape;
  const size_t row = (size_t)(H + 2 * KV) * D, out_row = (size_t)H * D;
  const double scale = 1.0 / std::sqrt((double)D);
  RoundedTermMagnitudes m{Doubles(out.size(), 0.0), Doubles(qkv.size(), 0.0)};
  Doubles p(T), ds(T);
  auto dot = [D](const double* a, const double* b) {
    double sum = 0.0;
    for (int d = 0; d < D; d++) sum += a[d] * b[d];
    return sum;
  };
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < H; h++) {
      const int g = h / (H / KV);
      const size_t key_at = (size_t)(H + g) * D, value_at = (size_t)(H + KV + g) * D;
      for (int t = 0; t < T; t++) {
        const double* q = &qkv[((size_t)b * T + t) * row + (size_t)h * D];
        const double* dO = &dout[((size_t)b * T + t) * out_row + (size_t)h * D];
        double max = -std::numeric_limits<double>::infinity(), sum = 0.0;
        for (int s = 0; s <= t; s++) {
          p[s] = dot(q, &qkv[((size_t)b * T + s) * row + key_at]) * scale;
          max = std::max(max, p[s]);
        }
        for (int s = 0; s <= t; s++) sum += (p[s] = std::exp(p[s] - max));
        const double delta = dot(dO, &out[((size_t)b * T + t) * out_row + (size_t)h * D]);
        for (int s = 0; s <= t; s++) {
          p[s] /= sum;
          ds[s] = p[s] * (dot(dO, &qkv[((size_t)b * T + s) * row + value_at]) - delta) * scale;
        }
        double* out_m = &m.out[((size_t)b * T + t) * out_row + (size_t)h * D];
        double* dq_m = &m.dqkv[((size_t)b * T + t) * row + (size_t)h * D];
        for (int s = 0; s <= t; s++) {
          const double* k = &qkv[((size_t)b * T + s) * row + key_at];
          const double* v = &qkv[((size_t)b * T + s) * row + value_at];
          double* dk_m = &m.dqkv[((size_t)b * T + s) * row + key_at];
          double* dv_m = &m.dqkv[((size_t)b * T + s) * row + value_at];
          const double abs_ds = std::fabs(ds[s]);
          for (int d = 0; d < D; d++) {
            out_m[d] += p[s] * std::fabs(v[d]);
            dq_m[d] += abs_ds * std::fabs(k[d]);
            dk_m[d] += abs_ds * std::fabs(q[d]);
            dv_m[d] += p[s] * std::fabs(dO[d]);
          }
        }
      }
    }
  }
  return m;
}

// kCudaAttentionTolerance, plus for bf16 the rounded factors' bound and two ulps.
Doubles cuda_bounds(const Doubles& expected, const Doubles* rounded_term_magnitude) {
  Doubles bound = tolerance_bounds(expected, kCudaAttentionTolerance);
  if (rounded_term_magnitude) {
    for (size_t i = 0; i < bound.size(); i++)
      bound[i] +=
          kBf16Rounding * (*rounded_term_magnitude)[i] + 2.0 * kBf16Ulp * std::fabs(expected[i]);
  }
  return bound;
}

// doc_start: (B, T) document starts on be's device, or null (causal).
template <class T>
void forward_on(const Backend& be, T* out, float* lse, const T* qkv, const AttentionShape& s,
                const int32_t* doc_start = nullptr) {
  be.ops<T>().attention_forward(out, lse, qkv, doc_start, s.B, s.T, s.H, s.KV, s.D);
}

template <class T>
void backward_on(const Backend& be, T* dqkv, const T* dout, const T* qkv, const T* out,
                 const float* lse, const AttentionShape& s, const int32_t* doc_start = nullptr) {
  be.ops<T>().attention_backward(dqkv, dout, qkv, out, lse, doc_start, s.B, s.T, s.H, s.KV, s.D);
}

std::vector<AttentionShape> attention_shapes(const OpRow& row, bool with_large) {
  std::vector<AttentionShape> shapes = shapes_for(row, kCpuShapes, kCudaShapes);
  if (row.cuda()) return shapes;
  if (with_large || row.dtype == Dtype::bf16)
    shapes.insert(shapes.end(), std::begin(kCpuLargeShapes), std::end(kCpuLargeShapes));
  return shapes;
}

// qkv in [-2, 2] (scores spread over a few units, so softmax is neither flat
// nor one-hot). cpu f32: out and lse against the reference
// (kForwardTolerance); cpu bf16: the forward widens qkv into the same fp32
// scratch tiles as fp32 and does every sum there, so out is the fp32 out
// rounded once and lse the same bits; cuda: cuda_bounds against the CPU twin.
template <class T>
void attention_forward_with(const OpRow& row, const KernelUnderTest& kernel) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(row.cuda() ? 401 : 9);
  const Backend& be = *kernel.backend;
  for (const AttentionShape& s : attention_shapes(row, true)) {
    SCOPED_TRACE(describe(s));
    const Floats qkv = random_values(qkv_size(s), rng, -2.0f, 2.0f, bf16);
    const std::vector<T> qkv_t = stored<T>(qkv);
    Buffer<T> d_qkv(be, qkv_t), d_out(be, nan_filled<T>(out_size(s)));
    Buffer<float> d_lse(be, Floats(lse_size(s), kNaN));
    const size_t fallbacks = KernelUnderTest::fallbacks();
    forward_on<T>(be, d_out.get(), d_lse.get(), d_qkv.get(), s);
    kernel.expect_ran(s, fallbacks);
    const std::vector<T> out = d_out.download();
    const Floats lse = d_lse.download();
    EXPECT_TRUE(d_out.guards_intact() && d_lse.guards_intact());
    if (row.cuda()) {
      std::vector<T> twin_out(out.size());
      Floats twin_lse(lse.size());
      forward_on<T>(backend_cpu(), twin_out.data(), twin_lse.data(), qkv_t.data(), s);
      const Doubles expected_out = to_doubles(twin_out), expected_lse = to_doubles(twin_lse);
      RoundedTermMagnitudes magnitude;
      if (bf16)  // out's magnitudes do not depend on dout
        magnitude =
            rounded_term_magnitudes(to_doubles(qkv), Doubles(out.size(), 0.0), expected_out, s);
      expect_within(to_doubles(out), expected_out,
                    cuda_bounds(expected_out, bf16 ? &magnitude.out : nullptr), "out");
      expect_within(to_doubles(lse), expected_lse, cuda_bounds(expected_lse, nullptr), "lse");
    } else if (bf16) {
      Floats out32(out.size()), lse32(lse.size());
      forward_on<float>(backend_cpu(), out32.data(), lse32.data(), qkv.data(), s);
      expect_fp32_rounded(out, out32, "out");
      expect_identical(lse, lse32, "lse");
    } else {
      Vec ref_lse;
      const Vec ref =
          reference::attention_forward(to_doubles(qkv), s.B, s.T, s.H, s.KV, s.D, &ref_lse);
      expect_close(out, ref, kForwardTolerance, "out");
      expect_close(lse, ref_lse, kForwardTolerance, "lse");
    }
  }
}

// dqkv pre-filled with NaN (overwritten). cpu f32: finite differences on the
// small shapes (kBackwardTolerance); cpu bf16: both precisions get the bf16
// forward's out (widened for fp32); only delta = dout_t . out_t reads bf16
// directly, so dqkv is within kOneRounding of fp32; cuda: cuda_bounds
// against the CPU twin, both given the CPU forward's out and lse.
template <class T>
void attention_backward_with(const OpRow& row, const KernelUnderTest& kernel) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(row.cuda() ? 402 : 10);
  for (const AttentionShape& s : attention_shapes(row, false)) {
    SCOPED_TRACE(describe(s));
    const Floats qkv = random_values(qkv_size(s), rng, -2.0f, 2.0f, bf16);
    const Floats dout = random_values(out_size(s), rng, -1.0f, 1.0f, bf16);
    const std::vector<T> qkv_t = stored<T>(qkv), dout_t = stored<T>(dout);
    std::vector<T> out(out_size(s));
    Floats lse(lse_size(s));
    forward_on<T>(backend_cpu(), out.data(), lse.data(), qkv_t.data(), s);
    const Backend& be = *kernel.backend;
    Buffer<T> d_qkv(be, qkv_t), d_dout(be, dout_t), d_out(be, out);
    Buffer<float> d_lse(be, lse);
    Buffer<T> d_dqkv(be, nan_filled<T>(qkv.size()));
    const size_t fallbacks = KernelUnderTest::fallbacks();
    backward_on<T>(be, d_dqkv.get(), d_dout.get(), d_qkv.get(), d_out.get(), d_lse.get(), s);
    kernel.expect_ran(s, fallbacks);
    const std::vector<T> dqkv = d_dqkv.download();
    EXPECT_TRUE(d_dqkv.guards_intact());
    if (row.cuda()) {
      std::vector<T> twin(qkv.size());
      backward_on<T>(backend_cpu(), twin.data(), dout_t.data(), qkv_t.data(), out.data(),
                     lse.data(), s);
      const Doubles expected = to_doubles(twin);
      RoundedTermMagnitudes magnitude;
      if (bf16)
        magnitude = rounded_term_magnitudes(to_doubles(qkv), to_doubles(dout), to_doubles(out), s);
      expect_within(to_doubles(dqkv), expected,
                    cuda_bounds(expected, bf16 ? &magnitude.dqkv : nullptr), "dqkv");
    } else if (bf16) {
      Floats dqkv32(qkv.size(), kNaN);
      backward_on<float>(backend_cpu(), dqkv32.data(), dout.data(), qkv.data(),
                         to_floats(out).data(), lse.data(), s);
      expect_close(dqkv, dqkv32, kOneRounding, "dqkv");
    } else {
      const Vec grad = finite_difference_gradient(
          [&](const Vec& x) { return reference::attention_forward(x, s.B, s.T, s.H, s.KV, s.D); },
          to_doubles(qkv), to_doubles(dout));
      expect_close(dqkv, grad, kBackwardTolerance, "dqkv");
    }
  }
}

// On the large shapes a full finite-difference gradient costs too many
// reference forwards, so a random sample of qkv elements is checked, plus the
// first and last (first query, last value) elements; cpu f32 only.
void attention_backward_sampled(const OpRow& row) {
  std::mt19937 rng(23);
  const size_t kSamples = 120;
  for (const AttentionShape& s : kCpuLargeShapes) {
    SCOPED_TRACE(describe(s));
    const Floats qkv = random_floats(qkv_size(s), rng, -1.0f, 1.0f);
    const Floats dout = random_floats(out_size(s), rng);
    Floats out(dout.size()), lse(lse_size(s));
    forward_on<float>(backend_cpu(), out.data(), lse.data(), qkv.data(), s);
    Buffer<float> d_qkv(row.backend(), qkv), d_dout(row.backend(), dout), d_out(row.backend(), out);
    Buffer<float> d_lse(row.backend(), lse), d_dqkv(row.backend(), Floats(qkv.size(), kNaN));
    backward_on<float>(row.backend(), d_dqkv.get(), d_dout.get(), d_qkv.get(), d_out.get(),
                       d_lse.get(), s);
    const Floats dqkv = d_dqkv.download();
    std::vector<size_t> indices = {0, qkv.size() - 1};
    std::uniform_int_distribution<size_t> pick(0, qkv.size() - 1);
    for (size_t k = 0; k < kSamples; k++) indices.push_back(pick(rng));
    const Vec grad = finite_difference_gradient(
        [&](const Vec& x) { return reference::attention_forward(x, s.B, s.T, s.H, s.KV, s.D); },
        to_doubles(qkv), to_doubles(dout), indices);
    Floats sampled;
    for (size_t i : indices) sampled.push_back(dqkv[i]);
    expect_close(sampled, grad, kBackwardTolerance, "sampled dqkv");
    for (float g : dqkv) ASSERT_FALSE(std::isnan(g)) << "dqkv not fully overwritten";
  }
}

// Determinism and overwrite: forward, then backward on the forward's own out
// and lse, first over NaN prefills (lse and dqkv must come out finite), then
// over huge garbage (-3e38): the same bits (the second run would differ
// wherever an output were accumulated into or left unwritten). On the CPU also
// the same bits at 1, 2 and 3 threads (B = 2, T = 70: two query tiles).
template <class T>
void attention_deterministic_with(const OpRow& row, const KernelUnderTest& kernel) {
  std::mt19937 rng(row.cuda() ? (std::is_same_v<T, Bf16> ? 404 : 403) : 11);
  const std::vector<AttentionShape> shapes =
      row.cuda()
          ? std::vector<AttentionShape>{{2, 129, 8, 2, 128}, {1, 70, 4, 4, 64}, {2, 33, 4, 2, 16}}
          : std::vector<AttentionShape>{{2, 70, 4, 2, 8}};
  for (const AttentionShape& s : shapes) {
    SCOPED_TRACE(describe(s));
    const bool bf16_exact = std::is_same_v<T, Bf16>;
    const std::vector<T> qkv = stored<T>(random_values(qkv_size(s), rng, -2.0f, 2.0f, bf16_exact));
    const std::vector<T> dout = stored<T>(random_values(out_size(s), rng, -1.0f, 1.0f, bf16_exact));
    const Backend& be = *kernel.backend;
    Buffer<T> d_qkv(be, qkv), d_dout(be, dout);
    Buffer<T> d_out(be, std::vector<T>(out_size(s))), d_dqkv(be, std::vector<T>(qkv.size()));
    Buffer<float> d_lse(be, Floats(lse_size(s)));
    auto run = [&](float fill) {
      d_out.upload(stored<T>(Floats(d_out.size(), fill)));
      d_lse.upload(Floats(d_lse.size(), fill));
      d_dqkv.upload(stored<T>(Floats(d_dqkv.size(), fill)));
      forward_on<T>(be, d_out.get(), d_lse.get(), d_qkv.get(), s);
      backward_on<T>(be, d_dqkv.get(), d_dout.get(), d_qkv.get(), d_out.get(), d_lse.get(), s);
      Floats all = d_lse.download();
      append(all, to_floats(d_out.download()));
      append(all, to_floats(d_dqkv.download()));
      return all;
    };
    const Floats first = run(kNaN);
    for (float x : first) ASSERT_TRUE(std::isfinite(x)) << "out, lse or dqkv not written";
    expect_identical(run(-3e38f), first, "out, lse and dqkv, second run over garbage");
    if (row.cpu())
      expect_repeatable(
          row, [&] { return run(kNaN); }, "out, lse and dqkv");
    EXPECT_TRUE(d_out.guards_intact() && d_lse.guards_intact() && d_dqkv.guards_intact());
  }
}

// Head dims above 128 have no CUDA kernel: both entry points throw, naming D.
void attention_unsupported_head_dim(const OpRow& row) {
  const AttentionShape s{1, 4, 2, 1, 160};
  Buffer<float> qkv(row.backend(), Floats(qkv_size(s))), out(row.backend(), Floats(out_size(s)));
  Buffer<float> lse(row.backend(), Floats(lse_size(s))), dqkv(row.backend(), Floats(qkv_size(s)));
  auto expect_error = [](auto call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << " accepted D=160";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("D=160"), std::string::npos) << what << ": " << e.what();
    }
  };
  expect_error([&] { forward_on<float>(row.backend(), out.get(), lse.get(), qkv.get(), s); },
               "forward");
  expect_error(
      [&] {
        backward_on<float>(row.backend(), dqkv.get(), out.get(), qkv.get(), out.get(), lse.get(),
                           s);
      },
      "backward");
}

// ---- document masking ----------------------------------------------------------------

// Document starts (B, T) for shape s: each position t >= 1 begins a new
// document with probability 1/5 (short sequences) or 1/40 (T > 64, so that
// documents span several tiles), and sequence 0 also at T / 2 + 1, so its
// later query tiles skip whole key tiles. doc_start[b][t] is the last start
// at or before t (0 for a sequence's first, possibly partial, document).
Ints document_starts(const AttentionShape& s, std::mt19937& rng) {
  std::uniform_int_distribution<int> draw(0, s.T > 64 ? 39 : 4);
  Ints starts((size_t)s.B * s.T);
  for (int b = 0; b < s.B; b++) {
    for (int t = 0; t < s.T; t++) {
      const size_t n = (size_t)b * s.T + t;
      const bool begins = t > 0 && (draw(rng) == 0 || (b == 0 && t == s.T / 2 + 1));
      starts[n] = t == 0 ? 0 : begins ? t : starts[n - 1];
    }
  }
  return starts;
}

// Masked (doc_start) attention, forward and backward, on the f32 rows (the
// cuda bf16 bound needs the unmasked magnitudes; the masking logic is the
// same code for both types). cpu: out and lse against the masked reference
// (kForwardTolerance), dqkv against finite differences of it (every element
// on the small shapes, a sample on T = 150, which spans three 64-key tiles);
// cuda: against the CPU twin (kCudaAttentionTolerance) on shapes spanning
// several of its tiles. Every row: doc_start all zeros (one document per
// sequence) gives the bits of null (causal attention).
void attention_document_masked(const OpRow& row) {
  std::mt19937 rng(row.cuda() ? 405 : 12);
  const Backend& be = row.backend();
  std::vector<AttentionShape> shapes =
      row.cuda()
          ? std::vector<AttentionShape>{{2, 129, 4, 2, 64}, {1, 200, 2, 1, 32}, {2, 33, 4, 4, 16}}
          : std::vector<AttentionShape>(std::begin(kCpuShapes), std::end(kCpuShapes));
  if (row.cpu()) shapes.push_back({2, 150, 2, 1, 16});
  for (const AttentionShape& s : shapes) {
    SCOPED_TRACE(describe(s));
    const Floats qkv = random_floats(qkv_size(s), rng, -2.0f, 2.0f);
    const Floats dout = random_floats(out_size(s), rng);
    const Ints starts = document_starts(s, rng);
    Buffer<float> d_qkv(be, qkv), d_dout(be, dout);
    Buffer<int32_t> d_starts(be, starts), d_zeros(be, Ints(starts.size(), 0));
    // Forward then backward on the row, with doc_start `mask` (null: causal).
    auto run = [&](const int32_t* mask) {
      Buffer<float> d_out(be, Floats(out_size(s), kNaN)), d_lse(be, Floats(lse_size(s), kNaN));
      Buffer<float> d_dqkv(be, Floats(qkv.size(), kNaN));
      forward_on<float>(be, d_out.get(), d_lse.get(), d_qkv.get(), s, mask);
      backward_on<float>(be, d_dqkv.get(), d_dout.get(), d_qkv.get(), d_out.get(), d_lse.get(), s,
                         mask);
      EXPECT_TRUE(d_out.guards_intact() && d_lse.guards_intact() && d_dqkv.guards_intact());
      return std::vector<Floats>{d_out.download(), d_lse.download(), d_dqkv.download()};
    };
    const std::vector<Floats> masked = run(d_starts.get());
    const std::vector<Floats> causal = run(nullptr), one_document = run(d_zeros.get());
    for (int k = 0; k < 3; k++) expect_identical(one_document[k], causal[k], "zeros vs null");
    if (row.cuda()) {
      Floats out(out_size(s)), lse(lse_size(s)), dqkv(qkv.size());
      forward_on<float>(backend_cpu(), out.data(), lse.data(), qkv.data(), s, starts.data());
      backward_on<float>(backend_cpu(), dqkv.data(), dout.data(), qkv.data(), out.data(),
                         lse.data(), s, starts.data());
      const char* names[] = {"out", "lse", "dqkv"};
      const Floats* twin[] = {&out, &lse, &dqkv};
      for (int k = 0; k < 3; k++) {
        const Doubles expected = to_doubles(*twin[k]);
        expect_within(to_doubles(masked[k]), expected, cuda_bounds(expected, nullptr), names[k]);
      }
      continue;
    }
    Vec ref_lse;
    const Vec ref =
        reference::attention_forward(to_doubles(qkv), s.B, s.T, s.H, s.KV, s.D, &ref_lse, &starts);
    expect_close(masked[0], ref, kForwardTolerance, "out");
    expect_close(masked[1], ref_lse, kForwardTolerance, "lse");
    std::vector<size_t> indices;
    std::uniform_int_distribution<size_t> pick(0, qkv.size() - 1);
    for (size_t k = 0; k < (s.T > 64 ? 80 : qkv.size()); k++)
      indices.push_back(s.T > 64 ? pick(rng) : k);
    const Vec grad = finite_difference_gradient(
        [&](const Vec& x) {
          return reference::attention_forward(x, s.B, s.T, s.H, s.KV, s.D, nullptr, &starts);
        },
        to_doubles(qkv), to_doubles(dout), indices);
    Floats sampled;
    for (size_t i : indices) sampled.push_back(masked[2][i]);
    expect_close(sampled, grad, kBackwardTolerance, "dqkv");
  }
}

template <class T>
void attention_forward(const OpRow& row) {
  on_each_kernel(row, attention_forward_with<T>);
}
template <class T>
void attention_backward(const OpRow& row) {
  on_each_kernel(row, attention_backward_with<T>);
}
template <class T>
void attention_deterministic(const OpRow& row) {
  on_each_kernel(row, attention_deterministic_with<T>);
}

}  // namespace

std::vector<OpCase> attention_cases() {
  return {
      {"attention", "forward", kAllRows, {"attention_forward"}, LLM_BY_DTYPE(attention_forward)},
      {"attention",
       "backward_overwrites",
       kAllRows,
       {"attention_backward"},
       LLM_BY_DTYPE(attention_backward)},
      {"attention",
       "backward_sampled_large",
       kCpuF32,
       {"attention_backward"},
       attention_backward_sampled},
      {"attention",
       "deterministic_and_overwrites",
       kAllRows,
       {"attention_forward", "attention_backward"},
       LLM_BY_DTYPE(attention_deterministic)},
      {"attention",
       "document_masked_matches_reference",
       kF32Rows,
       {"attention_forward", "attention_backward"},
       attention_document_masked},
      {"attention",
       "unsupported_head_dim",
       kCudaF32,
       {"attention_forward", "attention_backward"},
       attention_unsupported_head_dim},
  };
}

}  // namespace llm::op_test
