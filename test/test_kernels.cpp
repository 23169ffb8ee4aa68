// The CPU kernels (model/kernels/*.cpp) against the double-precision naive
// reference (test/reference_ops.h): every forward against the reference, every
// backward against central finite differences of the reference, plus the
// accumulate-or-overwrite contract of each output and bit-identical results
// across OpenMP thread counts where the headers promise determinism.
// Harness: each gradient check uses L = sum(dout * f(x)) with a random dout,
// so dL/dx_i = (L(x + h e_i) - L(x - h e_i)) / 2h is one forward pair per input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/kernels/adamw.h"
#include "model/kernels/attention.h"
#include "model/kernels/cross_entropy.h"
#include "model/kernels/embedding.h"
#include "model/kernels/fill.h"
#include "model/kernels/matmul.h"
#include "model/kernels/residual.h"
#include "model/kernels/rmsnorm.h"
#include "model/kernels/rope.h"
#include "model/kernels/swiglu.h"
#include "test/kernel_test_support.h"
#include "test/reference_ops.h"

namespace {

using llm::reference::Vec;
using namespace llm::test_support;

// Forward of a float kernel against the double reference on identical inputs:
// each output is a short chain (<= ~100 terms) of float operations, each off
// by at most 6e-8 relative, so errors stay near 1e-6; 1e-5 leaves a margin
// while still catching any wrong index, scale or missing term.
constexpr Tolerance kForwardTolerance{1e-5, 1e-5};
// Backward against finite differences: the difference quotient on the double
// reference is good to ~1e-8 (step 1e-6: truncation ~h^2, rounding ~1e-16|L|/h),
// so the float kernel's rounding dominates; gradients chain more float
// operations than forwards (and are summed over rows), hence 1e-4.
constexpr Tolerance kBackwardTolerance{1e-4, 1e-4};
constexpr double kFiniteDifferenceStep = 1e-6;

Floats random_floats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Floats x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

Vec to_double(const Floats& x) { return Vec(x.begin(), x.end()); }

Vec add(const Vec& a, const Vec& b) { return llm::reference::residual_forward(a, b); }

// Checks every element; reports how many failed and the worst one.
void expect_close(const Floats& actual, const Vec& expected, Tolerance tol,
                  const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t failures = 0, worst = 0;
  double worst_excess = -1.0;
  for (size_t i = 0; i < actual.size(); i++) {
    const double allowed = tol.abs + tol.rel * std::fabs(expected[i]);
    const double error = std::fabs(actual[i] - expected[i]);
    const double excess = std::isnan(error) ? INFINITY : error - allowed;
    if (excess > 0) failures++;
    if (excess > worst_excess) worst_excess = excess, worst = i;
  }
  EXPECT_EQ(failures, 0u) << what << ": worst at [" << worst << "] actual " << actual[worst]
                          << " expected " << expected[worst];
}

double projection(const Vec& dout, const Vec& y) {
  double sum = 0.0;
  for (size_t i = 0; i < y.size(); i++) sum += dout[i] * y[i];
  return sum;
}

using Function = std::function<Vec(const Vec&)>;

// d/dx_i of sum(dout * f(x)) by central differences, for each i in indices.
Vec finite_difference_gradient(const Function& f, const Vec& x, const Vec& dout,
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

std::vector<size_t> all_indices(size_t n) {
  std::vector<size_t> indices(n);
  for (size_t i = 0; i < n; i++) indices[i] = i;
  return indices;
}

// The full gradient d/dx of sum(dout * f(x)).
Vec finite_difference_gradient(const Function& f, const Vec& x, const Vec& dout) {
  return finite_difference_gradient(f, x, dout, all_indices(x.size()));
}

Floats gather(const Floats& x, const std::vector<size_t>& indices) {
  Floats out;
  for (size_t i : indices) out.push_back(x[i]);
  return out;
}

// Thread counts compared by the determinism tests; 3 gives uneven splits.
constexpr int kThreadCounts[] = {1, 2, 3};

// ---- embedding ----------------------------------------------------------------

struct EmbeddingShape {
  int N, C, V;
};
constexpr EmbeddingShape kEmbeddingShapes[] = {{7, 13, 5}, {1, 1, 1}, {40, 70, 3}};

TEST(KernelEmbedding, ForwardCopiesRowsExactly) {
  std::mt19937 rng(1);
  for (auto [N, C, V] : kEmbeddingShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C << " V=" << V);
    const Floats wte = random_floats((size_t)V * C, rng);
    const Ints tokens = random_ints(N, V, rng);
    Floats out((size_t)N * C, kNaN);
    llm::cpu::embedding_forward(out.data(), tokens.data(), wte.data(), N, C);
    // A lookup copies bits: no tolerance.
    expect_close(out, llm::reference::embedding_forward(tokens, to_double(wte), N, C), {0, 0},
                 "out");
  }
}

TEST(KernelEmbedding, BackwardAccumulatesFiniteDifferenceGradient) {
  std::mt19937 rng(2);
  for (auto [N, C, V] : kEmbeddingShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C << " V=" << V);
    const Floats wte = random_floats((size_t)V * C, rng);
    const Ints tokens = random_ints(N, V, rng);  // V < N: tokens repeat
    const Floats dout = random_floats((size_t)N * C, rng);
    const Floats prefill = random_floats(wte.size(), rng);
    Floats dwte = prefill;
    llm::cpu::embedding_backward(dwte.data(), dout.data(), tokens.data(), N, C);
    const Vec grad = finite_difference_gradient(
        [&](const Vec& w) { return llm::reference::embedding_forward(tokens, w, N, C); },
        to_double(wte), to_double(dout));
    expect_close(dwte, add(to_double(prefill), grad), kBackwardTolerance, "dwte (+=)");
  }
}

TEST(KernelEmbedding, BackwardIsThreadCountIndependent) {
  std::mt19937 rng(3);
  const int N = 301, C = 150, V = 7;  // many repeats of each token, several column blocks
  const Ints tokens = random_ints(N, V, rng);
  const Floats dout = random_floats((size_t)N * C, rng);
  const Floats prefill = random_floats((size_t)V * C, rng);
  auto run = [&] {
    Floats dwte = prefill;
    llm::cpu::embedding_backward(dwte.data(), dout.data(), tokens.data(), N, C);
    return dwte;
  };
  const Floats first = with_threads(1, run);
  for (int threads : kThreadCounts)
    expect_same_bits(with_threads(threads, run), first, "dwte, threads " + std::to_string(threads));
}

// ---- rmsnorm ------------------------------------------------------------------

constexpr RowShape kRmsnormShapes[] = {{7, 13}, {1, 1}, {5, 64}, {3, 130}};
constexpr float kRmsnormEps = 1e-5f;

TEST(KernelRmsnorm, ForwardMatchesReference) {
  std::mt19937 rng(4);
  for (auto [N, C] : kRmsnormShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C);
    const Floats inp = random_floats((size_t)N * C, rng), weight = random_floats(C, rng);
    Floats out((size_t)N * C, kNaN), rstd(N, kNaN);
    llm::cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), N, C,
                              kRmsnormEps);
    Vec ref_rstd;
    const Vec ref = llm::reference::rmsnorm_forward(to_double(inp), to_double(weight), N, C,
                                                    kRmsnormEps, &ref_rstd);
    expect_close(out, ref, kForwardTolerance, "out");
    expect_close(rstd, ref_rstd, kForwardTolerance, "rstd");
  }
}

TEST(KernelRmsnorm, BackwardAccumulatesFiniteDifferenceGradients) {
  std::mt19937 rng(5);
  for (auto [N, C] : kRmsnormShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C);
    const Floats inp = random_floats((size_t)N * C, rng), weight = random_floats(C, rng);
    const Floats dout = random_floats(inp.size(), rng);
    Floats out(inp.size()), rstd(N);
    llm::cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), N, C,
                              kRmsnormEps);
    const Floats dinp_prefill = random_floats(inp.size(), rng);
    const Floats dweight_prefill = random_floats(C, rng);
    Floats dinp = dinp_prefill, dweight = dweight_prefill;
    llm::cpu::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(),
                               rstd.data(), N, C);
    const Vec x = to_double(inp), w = to_double(weight), dy = to_double(dout);
    const Vec grad_inp = finite_difference_gradient(
        [&](const Vec& xs) { return llm::reference::rmsnorm_forward(xs, w, N, C, kRmsnormEps); }, x,
        dy);
    const Vec grad_weight = finite_difference_gradient(
        [&](const Vec& ws) { return llm::reference::rmsnorm_forward(x, ws, N, C, kRmsnormEps); }, w,
        dy);
    expect_close(dinp, add(to_double(dinp_prefill), grad_inp), kBackwardTolerance, "dinp (+=)");
    expect_close(dweight, add(to_double(dweight_prefill), grad_weight), kBackwardTolerance,
                 "dweight (+=)");
  }
}

TEST(KernelRmsnorm, BackwardIsThreadCountIndependent) {
  std::mt19937 rng(6);
  const int N = 97, C = 200;  // several column blocks of dweight, uneven row splits
  const Floats inp = random_floats((size_t)N * C, rng), weight = random_floats(C, rng);
  const Floats dout = random_floats(inp.size(), rng);
  Floats out(inp.size()), rstd(N);
  llm::cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), N, C, kRmsnormEps);
  auto run = [&] {
    Floats dinp(inp.size(), 0.0f), dweight(C, 0.0f);
    llm::cpu::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(),
                               rstd.data(), N, C);
    dinp.insert(dinp.end(), dweight.begin(), dweight.end());
    return dinp;
  };
  const Floats first = with_threads(1, run);
  for (int threads : kThreadCounts)
    expect_same_bits(with_threads(threads, run), first,
                     "dinp and dweight, threads " + std::to_string(threads));
}

// ---- rope ---------------------------------------------------------------------

struct RopeShape {
  int B, T, H, KV, D;
};
constexpr RopeShape kRopeShapes[] = {{2, 5, 4, 2, 6}, {1, 1, 1, 1, 2}, {3, 4, 2, 1, 8}};
constexpr float kRopeTheta = 10000.0f;
// cos/sin of a double angle rounded once to float: within half an ulp of 1.
constexpr Tolerance kRopeTableTolerance{1e-7, 0};

TEST(KernelRope, TableMatchesReferenceAngles) {
  for (auto [T, D] : {std::pair{5, 6}, std::pair{300, 64}, std::pair{1, 2}}) {
    SCOPED_TRACE(testing::Message() << "T=" << T << " D=" << D);
    Floats cos((size_t)T * D / 2, kNaN), sin((size_t)T * D / 2, kNaN);
    llm::cpu::rope_table(cos.data(), sin.data(), T, D, kRopeTheta);
    Vec ref_cos(cos.size()), ref_sin(sin.size());
    for (int t = 0; t < T; t++) {
      for (int i = 0; i < D / 2; i++) {
        const double angle = llm::reference::rope_angle(t, i, D, kRopeTheta);
        ref_cos[(size_t)t * D / 2 + i] = std::cos(angle);
        ref_sin[(size_t)t * D / 2 + i] = std::sin(angle);
      }
    }
    expect_close(cos, ref_cos, kRopeTableTolerance, "cos");
    expect_close(sin, ref_sin, kRopeTableTolerance, "sin");
  }
}

// Rotates the q and k heads of a fused qkv buffer (v heads stay untouched).
TEST(KernelRope, ForwardMatchesReference) {
  std::mt19937 rng(7);
  for (auto [B, T, H, KV, D] : kRopeShapes) {
    SCOPED_TRACE(testing::Message() << "B=" << B << " T=" << T << " D=" << D);
    const int N = B * T, stride = (H + 2 * KV) * D, n_heads = H + KV;
    Floats cos((size_t)T * D / 2), sin((size_t)T * D / 2);
    llm::cpu::rope_table(cos.data(), sin.data(), T, D, kRopeTheta);
    const Floats x = random_floats((size_t)N * stride, rng);
    Floats y = x;
    llm::cpu::rope_forward(y.data(), cos.data(), sin.data(), N, T, n_heads, D, stride);
    expect_close(y,
                 llm::reference::rope_forward(to_double(x), N, T, n_heads, D, stride, kRopeTheta),
                 kForwardTolerance, "x");
    for (int n = 0; n < N; n++)
      for (int i = n_heads * D; i < stride; i++)
        ASSERT_EQ(y[(size_t)n * stride + i], x[(size_t)n * stride + i]) << "untouched v head";
  }
}

TEST(KernelRope, BackwardMatchesFiniteDifferenceGradient) {
  std::mt19937 rng(8);
  for (auto [B, T, H, KV, D] : kRopeShapes) {
    SCOPED_TRACE(testing::Message() << "B=" << B << " T=" << T << " D=" << D);
    const int N = B * T, stride = (H + 2 * KV) * D, n_heads = H + KV;
    Floats cos((size_t)T * D / 2), sin((size_t)T * D / 2);
    llm::cpu::rope_table(cos.data(), sin.data(), T, D, kRopeTheta);
    const Floats x = random_floats((size_t)N * stride, rng);
    const Floats dout = random_floats(x.size(), rng);
    Floats dx = dout;  // in place: dout becomes dx
    llm::cpu::rope_backward(dx.data(), cos.data(), sin.data(), N, T, n_heads, D, stride);
    const Vec grad = finite_difference_gradient(
        [&](const Vec& xs) {
          return llm::reference::rope_forward(xs, N, T, n_heads, D, stride, kRopeTheta);
        },
        to_double(x), to_double(dout));
    expect_close(dx, grad, kBackwardTolerance, "dx");
  }
}

// ---- attention ----------------------------------------------------------------

constexpr AttentionShape kAttentionShapes[] = {
    {2, 5, 4, 2, 6},  // grouped query
    {1, 6, 3, 3, 4},  // H == KV (multi-head)
    {2, 4, 4, 1, 5},  // KV == 1 (multi-query), odd D
    {3, 1, 2, 1, 8},  // T == 1
};
// The kernel tiles 64 queries x 64 keys and blocks D by 64, 32, 16, 8 and
// single floats: these shapes span several tiles, a partial last tile, and
// every D block (64 + 32 + 16 + 8 + 3 = 123).
constexpr AttentionShape kLargeAttentionShapes[] = {{1, 130, 4, 2, 64}, {1, 70, 2, 1, 123}};

TEST(KernelAttention, ForwardMatchesReference) {
  std::mt19937 rng(9);
  std::vector<AttentionShape> shapes(std::begin(kAttentionShapes), std::end(kAttentionShapes));
  shapes.insert(shapes.end(), std::begin(kLargeAttentionShapes), std::end(kLargeAttentionShapes));
  for (const AttentionShape& s : shapes) {
    SCOPED_TRACE(describe(s));
    const auto [B, T, H, KV, D] = s;
    const Floats qkv = random_floats((size_t)B * T * (H + 2 * KV) * D, rng, -2.0f, 2.0f);
    Floats out((size_t)B * T * H * D, kNaN), lse((size_t)B * H * T, kNaN);
    llm::cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, H, KV, D);
    Vec ref_lse;
    const Vec ref = llm::reference::attention_forward(to_double(qkv), B, T, H, KV, D, &ref_lse);
    expect_close(out, ref, kForwardTolerance, "out");
    expect_close(lse, ref_lse, kForwardTolerance, "lse");
  }
}

TEST(KernelAttention, BackwardOverwritesFiniteDifferenceGradient) {
  std::mt19937 rng(10);
  for (const AttentionShape& s : kAttentionShapes) {
    SCOPED_TRACE(describe(s));
    const auto [B, T, H, KV, D] = s;
    const Floats qkv = random_floats((size_t)B * T * (H + 2 * KV) * D, rng, -2.0f, 2.0f);
    const Floats dout = random_floats((size_t)B * T * H * D, rng);
    Floats out(dout.size()), lse((size_t)B * H * T);
    llm::cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, H, KV, D);
    Floats dqkv(qkv.size(), kNaN);  // overwritten: NaN must not survive
    llm::cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                                 H, KV, D);
    const Vec grad = finite_difference_gradient(
        [&](const Vec& x) { return llm::reference::attention_forward(x, B, T, H, KV, D); },
        to_double(qkv), to_double(dout));
    expect_close(dqkv, grad, kBackwardTolerance, "dqkv");
  }
}

// On the large shapes a full finite-difference gradient costs too many
// reference forwards, so a random sample of qkv elements is checked, plus the
// first and last (first query, last value) elements.
TEST(KernelAttention, BackwardMatchesSampledFiniteDifferencesOnLargeShapes) {
  std::mt19937 rng(23);
  const size_t kSamples = 120;
  for (const AttentionShape& s : kLargeAttentionShapes) {
    SCOPED_TRACE(describe(s));
    const auto [B, T, H, KV, D] = s;
    const Floats qkv = random_floats((size_t)B * T * (H + 2 * KV) * D, rng, -1.0f, 1.0f);
    const Floats dout = random_floats((size_t)B * T * H * D, rng);
    Floats out(dout.size()), lse((size_t)B * H * T);
    llm::cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, H, KV, D);
    Floats dqkv(qkv.size(), kNaN);
    llm::cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                                 H, KV, D);
    std::vector<size_t> indices = {0, qkv.size() - 1};
    std::uniform_int_distribution<size_t> pick(0, qkv.size() - 1);
    for (size_t k = 0; k < kSamples; k++) indices.push_back(pick(rng));
    const Vec grad = finite_difference_gradient(
        [&](const Vec& x) { return llm::reference::attention_forward(x, B, T, H, KV, D); },
        to_double(qkv), to_double(dout), indices);
    expect_close(gather(dqkv, indices), grad, kBackwardTolerance, "sampled dqkv");
    for (float g : dqkv) ASSERT_FALSE(std::isnan(g)) << "dqkv not fully overwritten";
  }
}

TEST(KernelAttention, ForwardAndBackwardAreThreadCountIndependent) {
  std::mt19937 rng(11);
  const int B = 2, T = 70, H = 4, KV = 2, D = 8;  // two query tiles
  const Floats qkv = random_floats((size_t)B * T * (H + 2 * KV) * D, rng, -2.0f, 2.0f);
  const Floats dout = random_floats((size_t)B * T * H * D, rng);
  auto run = [&] {
    Floats out(dout.size()), lse((size_t)B * H * T), dqkv(qkv.size());
    llm::cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, H, KV, D);
    llm::cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                                 H, KV, D);
    out.insert(out.end(), lse.begin(), lse.end());
    out.insert(out.end(), dqkv.begin(), dqkv.end());
    return out;
  };
  const Floats first = with_threads(1, run);
  for (int threads : kThreadCounts)
    expect_same_bits(with_threads(threads, run), first,
                     "out, lse and dqkv, threads " + std::to_string(threads));
}

// ---- swiglu -------------------------------------------------------------------

constexpr RowShape kSwigluShapes[] = {{7, 13}, {1, 1}, {4, 40}};

// Rows of [gate | up] in [-4, 4], except that the last row's gates start with
// -100 and 100, where exp(-gate) overflows float and sigmoid saturates.
Floats random_h13(int N, int F, std::mt19937& rng) {
  Floats h13 = random_floats((size_t)N * 2 * F, rng, -4.0f, 4.0f);
  float* last_gates = h13.data() + (size_t)(N - 1) * 2 * F;
  last_gates[0] = -100.0f;
  if (F > 1) last_gates[1] = 100.0f;
  return h13;
}

TEST(KernelSwiglu, ForwardMatchesReference) {
  std::mt19937 rng(12);
  for (auto [N, F] : kSwigluShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " F=" << F);
    const Floats h13 = random_h13(N, F, rng);
    Floats out((size_t)N * F, kNaN);
    llm::cpu::swiglu_forward(out.data(), h13.data(), N, F);
    expect_close(out, llm::reference::swiglu_forward(to_double(h13), N, F), kForwardTolerance,
                 "out");
  }
}

TEST(KernelSwiglu, BackwardOverwritesFiniteDifferenceGradient) {
  std::mt19937 rng(13);
  for (auto [N, F] : kSwigluShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " F=" << F);
    const Floats h13 = random_h13(N, F, rng);
    const Floats dout = random_floats((size_t)N * F, rng);
    Floats dh13(h13.size(), kNaN);
    llm::cpu::swiglu_backward(dh13.data(), dout.data(), h13.data(), N, F);
    const Vec grad = finite_difference_gradient(
        [&](const Vec& x) { return llm::reference::swiglu_forward(x, N, F); }, to_double(h13),
        to_double(dout));
    expect_close(dh13, grad, kBackwardTolerance, "dh13");
  }
}

// ---- matmul -------------------------------------------------------------------

constexpr MatmulShape kMatmulShapes[] = {{7, 13, 5}, {1, 1, 1}, {33, 17, 9}};

TEST(KernelMatmul, ForwardMatchesReference) {
  std::mt19937 rng(14);
  for (auto [N, C, OC] : kMatmulShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C << " OC=" << OC);
    const Floats inp = random_floats((size_t)N * C, rng),
                 weight = random_floats((size_t)OC * C, rng);
    Floats out((size_t)N * OC, kNaN);
    llm::cpu::matmul_forward(out.data(), inp.data(), weight.data(), N, C, OC);
    expect_close(out, llm::reference::matmul_forward(to_double(inp), to_double(weight), N, C, OC),
                 kForwardTolerance, "out");
  }
}

TEST(KernelMatmul, BackwardMatchesFiniteDifferenceGradients) {
  std::mt19937 rng(15);
  for (auto [N, C, OC] : kMatmulShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C << " OC=" << OC);
    const Floats inp = random_floats((size_t)N * C, rng),
                 weight = random_floats((size_t)OC * C, rng);
    const Floats dout = random_floats((size_t)N * OC, rng);
    const Floats dweight_prefill = random_floats(weight.size(), rng);
    Floats dinp(inp.size(), kNaN), dweight = dweight_prefill;
    llm::cpu::matmul_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(),
                              N, C, OC);
    const Vec x = to_double(inp), w = to_double(weight), dy = to_double(dout);
    const Vec grad_inp = finite_difference_gradient(
        [&](const Vec& xs) { return llm::reference::matmul_forward(xs, w, N, C, OC); }, x, dy);
    const Vec grad_weight = finite_difference_gradient(
        [&](const Vec& ws) { return llm::reference::matmul_forward(x, ws, N, C, OC); }, w, dy);
    expect_close(dinp, grad_inp, kBackwardTolerance, "dinp (overwritten)");
    const Vec expected_dweight = add(to_double(dweight_prefill), grad_weight);
    expect_close(dweight, expected_dweight, kBackwardTolerance, "dweight (+=)");

    // Without dinp only dweight is computed, still accumulating.
    Floats dweight_again = dweight;
    llm::cpu::matmul_backward<float>(nullptr, dweight_again.data(), dout.data(), inp.data(),
                                     weight.data(), N, C, OC);
    expect_close(dweight_again, add(expected_dweight, grad_weight), kBackwardTolerance,
                 "dweight (+=, dinp null)");
  }
}

// ---- residual -----------------------------------------------------------------

TEST(KernelResidual, ForwardMatchesReferenceAndMayAlias) {
  std::mt19937 rng(16);
  for (size_t n : {size_t{1}, size_t{13}, size_t{1000}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const Floats a = random_floats(n, rng), b = random_floats(n, rng);
    const Vec ref = llm::reference::residual_forward(to_double(a), to_double(b));
    Floats out(n, kNaN);
    llm::cpu::add_vectors(out.data(), a.data(), b.data(), n);
    // One correctly rounded float addition: |error| <= 2^-24 |exact sum|.
    const Tolerance one_rounding{0, std::ldexp(1.0, -24)};
    expect_close(out, ref, one_rounding, "out");
    Floats in_place = a;
    llm::cpu::add_vectors(in_place.data(), in_place.data(), b.data(), n);
    expect_same_bits(in_place, out, "out aliasing a");
  }
}

// ---- fill ---------------------------------------------------------------------

TEST(KernelFill, ZeroesExactlyTheRange) {
  std::mt19937 rng(24);
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const Floats before = random_floats(n + 2, rng, 1.0f, 2.0f);  // nonzero everywhere
    Floats x = before;
    llm::cpu::fill_zero(x.data() + 1, n);
    EXPECT_EQ(x.front(), before.front());
    EXPECT_EQ(x.back(), before.back());
    for (size_t i = 1; i <= n; i++) ASSERT_EQ(x[i], 0.0f) << "index " << i;
  }
}

// ---- cross-entropy ------------------------------------------------------------

struct CrossEntropyShape {
  int N, V;
};
constexpr CrossEntropyShape kCrossEntropyShapes[] = {{7, 13}, {1, 1}, {3, 100}};

TEST(KernelCrossEntropy, ForwardMatchesReferenceAndKeepsLogits) {
  std::mt19937 rng(17);
  for (auto [N, V] : kCrossEntropyShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " V=" << V);
    const Floats logits = random_floats((size_t)N * V, rng, -5.0f, 5.0f);
    const Ints targets = random_ints(N, V, rng);
    Floats losses(N, kNaN), logits_after = logits;
    llm::cpu::cross_entropy_forward(losses.data(), logits_after.data(), targets.data(), N, V);
    expect_close(losses, llm::reference::cross_entropy_forward(to_double(logits), targets, N, V),
                 kForwardTolerance, "losses");
    expect_same_bits(logits_after, logits, "logits untouched");
  }
}

TEST(KernelCrossEntropy, ForwardBackwardOverwritesLogitsWithFiniteDifferenceGradient) {
  std::mt19937 rng(18);
  const float dloss = 0.37f;  // the gradient is of dloss * sum(losses)
  for (auto [N, V] : kCrossEntropyShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " V=" << V);
    const Floats logits = random_floats((size_t)N * V, rng, -5.0f, 5.0f);
    const Ints targets = random_ints(N, V, rng);
    Floats losses(N, kNaN), dlogits = logits;
    llm::cpu::cross_entropy_forward_backward(losses.data(), dlogits.data(), targets.data(), N, V,
                                             dloss);
    expect_close(losses, llm::reference::cross_entropy_forward(to_double(logits), targets, N, V),
                 kForwardTolerance, "losses");
    const Vec grad = finite_difference_gradient(
        [&](const Vec& x) { return llm::reference::cross_entropy_forward(x, targets, N, V); },
        to_double(logits), Vec(N, dloss));
    expect_close(dlogits, grad, kBackwardTolerance, "dlogits");
  }
}

TEST(KernelCrossEntropy, LargeLogitsStayFinite) {
  std::mt19937 rng(19);
  const int N = 4, V = 50;
  Floats logits = random_floats((size_t)N * V, rng, -3.0f, 3.0f);
  for (int n = 0; n < N; n++) logits[(size_t)n * V + n] += 1000.0f;  // exp(1000) overflows
  logits[(size_t)(N - 1) * V] = -1000.0f;
  const Ints targets = {0, 0, 2, 7};  // row 0: the huge logit is the target; others not
  const Vec ref = llm::reference::cross_entropy_forward(to_double(logits), targets, N, V);
  Floats losses(N, kNaN);
  llm::cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V);
  expect_close(losses, ref, kForwardTolerance, "losses (forward)");
  Floats dlogits = logits;
  llm::cpu::cross_entropy_forward_backward(losses.data(), dlogits.data(), targets.data(), N, V,
                                           1.0f);
  expect_close(losses, ref, kForwardTolerance, "losses (forward_backward)");
  for (int n = 0; n < N; n++) {
    double row_sum = 0.0;  // softmax sums to one, minus the one-hot: zero
    for (int v = 0; v < V; v++) {
      ASSERT_TRUE(std::isfinite(dlogits[(size_t)n * V + v])) << "row " << n << " column " << v;
      row_sum += dlogits[(size_t)n * V + v];
    }
    EXPECT_NEAR(row_sum, 0.0, 1e-6) << "row " << n;
  }
}

// ---- adamw --------------------------------------------------------------------

struct AdamwSettings {
  float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f,
        grad_scale = 0.5f;
};

TEST(KernelAdamw, MatchesNaiveLoopOverSteps) {
  std::mt19937 rng(20);
  const size_t n = 1001;
  const AdamwSettings a;
  Floats params = random_floats(n, rng), m(n, 0.0f), v(n, 0.0f);
  Vec ref_params = to_double(params), ref_m(n, 0.0), ref_v(n, 0.0);
  for (int t = 1; t <= 5; t++) {
    SCOPED_TRACE(testing::Message() << "step " << t);
    const Floats grads = random_floats(n, rng);
    llm::cpu::adamw_update(params.data(), grads.data(), m.data(), v.data(), n, a.lr, a.beta1,
                           a.beta2, a.eps, a.weight_decay, a.grad_scale, t);
    llm::reference::adamw_update(ref_params, to_double(grads), ref_m, ref_v, a.lr, a.beta1, a.beta2,
                                 a.eps, a.weight_decay, a.grad_scale, t);
    expect_close(params, ref_params, kForwardTolerance, "params");
    expect_close(m, ref_m, kForwardTolerance, "m");
    expect_close(v, ref_v, kForwardTolerance, "v");
  }
}

// The header's sharding invariant: updating two slices gives the bits of one
// update of the whole, whatever the thread count.
TEST(KernelAdamw, SlicesAndThreadCountsGiveIdenticalBits) {
  std::mt19937 rng(21);
  const size_t n = 1001, split = 389;
  const AdamwSettings a;
  const Floats params0 = random_floats(n, rng), grads = random_floats(n, rng);
  const Floats m0 = random_floats(n, rng), v0 = random_floats(n, rng, 0.0f, 1.0f);
  auto update = [&](Floats& p, Floats& m, Floats& v, size_t begin, size_t end) {
    llm::cpu::adamw_update(p.data() + begin, grads.data() + begin, m.data() + begin,
                           v.data() + begin, end - begin, a.lr, a.beta1, a.beta2, a.eps,
                           a.weight_decay, a.grad_scale, 3);
  };
  auto run = [&](bool sliced) {
    Floats p = params0, m = m0, v = v0;
    if (sliced) {
      update(p, m, v, 0, split);
      update(p, m, v, split, n);
    } else {
      update(p, m, v, 0, n);
    }
    p.insert(p.end(), m.begin(), m.end());
    p.insert(p.end(), v.begin(), v.end());
    return p;
  };
  const Floats whole = with_threads(1, [&] { return run(false); });
  for (int threads : kThreadCounts) {
    expect_same_bits(with_threads(threads, [&] { return run(false); }), whole,
                     "whole, threads " + std::to_string(threads));
    expect_same_bits(with_threads(threads, [&] { return run(true); }), whole,
                     "sliced, threads " + std::to_string(threads));
  }
}

TEST(KernelAdamw, SumSquaresMatchesDoubleLoopForAnyThreadCount) {
  std::mt19937 rng(22);
  for (size_t n : {size_t{0}, size_t{1}, size_t{13}, size_t{100003}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const Floats x = random_floats(n, rng);
    double expected = 0.0;
    for (float value : x) expected += (double)value * value;
    const double first = with_threads(1, [&] { return llm::cpu::sum_squares(x.data(), n); });
    // Double accumulation of float squares: only reassociation differs.
    EXPECT_NEAR(first, expected, 1e-12 * expected);
    for (int threads : kThreadCounts) {
      const double again =
          with_threads(threads, [&] { return llm::cpu::sum_squares(x.data(), n); });
      EXPECT_EQ(std::memcmp(&again, &first, sizeof(double)), 0) << "threads " << threads;
    }
  }
}

}  // namespace
