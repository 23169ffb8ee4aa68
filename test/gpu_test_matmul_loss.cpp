// The CUDA twins of matmul, cross-entropy and AdamW / sum_squares against their
// CPU twins on the same random host inputs (fp32 and bf16), through the CUDA
// backend's op table so the suite builds without CUDA and skips without a GPU.
// Tolerances, each explained where it is defined, allow only what the two
// implementations may legitimately differ by: the order of fp32 sums, the
// accuracy of exp (2 ulp on both sides) and, in bf16, one final rounding
// falling on the other side of a tie. Also checked: overwrite (outputs
// pre-filled with NaN) and accumulate (dweight pre-filled) contracts,
// dinp == nullptr, in-place dlogits, finite losses on huge logits, and
// identical bits when an op is run twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/bf16.h"
#include "model/backend.h"
#include "model/kernels/adamw.h"
#include "model/kernels/cross_entropy.h"
#include "model/kernels/matmul.h"
#include "test/gpu_test_support.h"
#include "test/kernel_test_support.h"

namespace {

using llm::Bf16;
using namespace llm::test_support;

const llm::Backend& gpu() { return llm::backend_cuda(); }

constexpr double kFloatEpsilon = 0x1p-23;  // fp32 ulp of 1
constexpr double kBf16Ulp = 0x1p-7;        // bf16 ulp of 1: 8 significant bits





template <class T>
void expect_identical_bits(const std::vector<T>& a, const std::vector<T>& b,
                           const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)), 0) << what;
}

// ---- matmul -------------------------------------------------------------------

// Tiny, odd (not multiples of 8 or 16, so cuBLASLt takes its unaligned paths)
// and model-like shapes.
constexpr MatmulShape kGpuMatmulShapes[] = {
    {1, 1, 1}, {7, 13, 5}, {3, 1, 17}, {5, 17, 1}, {64, 96, 160}, {33, 40, 24}, {100, 384, 1152}};

std::string describe(const MatmulShape& s) {
  return "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " OC=" + std::to_string(s.OC);
}

// Two fp32 evaluations of a sum of k products in different orders (cuBLASLt's
// tiles and split-K against OpenBLAS's kernels) differ by rounding errors that
// grow like sqrt(k) ulps of the partial sums; every partial sum is bounded by
// M = sum |term|. 4 sqrt(k) eps M leaves a wide margin over that random walk
// while a wrong or missing term (about M / k, far above eps M for our k) fails.
Doubles reassociation_bounds(const Doubles& magnitude, int k) {
  Doubles bound(magnitude.size());
  for (size_t i = 0; i < magnitude.size(); i++)
    bound[i] = 4.0 * std::sqrt((double)k) * kFloatEpsilon * magnitude[i];
  return bound;
}

// The same plus two bf16 ulps of the result: the GPU and CPU round fp32
// values that differ by the reassociation bound, which may straddle a bf16
// rounding boundary (one ulp); the second ulp is margin. bf16 products are
// exact in fp32, so nothing else differs.
Doubles bf16_result_bounds(const Doubles& magnitude, int k, const Doubles& expected) {
  Doubles bound = reassociation_bounds(magnitude, k);
  for (size_t i = 0; i < bound.size(); i++) bound[i] += 2.0 * kBf16Ulp * std::fabs(expected[i]);
  return bound;
}

// Sums of |products| of each GEMM result, the M of reassociation_bounds.
struct MatmulMagnitudes {
  Doubles out, dinp, dweight;  // dweight includes |prefill|
};

MatmulMagnitudes matmul_magnitudes(const Doubles& inp, const Doubles& weight, const Doubles& dout,
                                   const Doubles& dweight_prefill, int N, int C, int OC) {
  MatmulMagnitudes m{Doubles((size_t)N * OC, 0.0), Doubles((size_t)N * C, 0.0), Doubles()};
  m.dweight = dweight_prefill;
  for (double& x : m.dweight) x = std::fabs(x);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      const double dy = std::fabs(dout[(size_t)n * OC + o]);
      for (int c = 0; c < C; c++) {
        const double x = std::fabs(inp[(size_t)n * C + c]),
                     w = std::fabs(weight[(size_t)o * C + c]);
        m.out[(size_t)n * OC + o] += x * w;
        m.dinp[(size_t)n * C + c] += dy * w;
        m.dweight[(size_t)o * C + c] += dy * x;
      }
    }
  return m;
}

TEST(GpuMatmul, Fp32MatchesCpuAndKeepsContracts) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(101);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const MatmulShape& s : kGpuMatmulShapes) {
    const auto [N, C, OC] = s;
    SCOPED_TRACE(describe(s));
    const Floats inp = random_floats((size_t)N * C, rng),
                 weight = random_floats((size_t)OC * C, rng);
    const Floats dout = random_floats((size_t)N * OC, rng);
    const Floats dweight_prefill = random_floats(weight.size(), rng);
    const MatmulMagnitudes magnitude =
        matmul_magnitudes(to_doubles(inp), to_doubles(weight), to_doubles(dout),
                          to_doubles(dweight_prefill), N, C, OC);

    Floats out((size_t)N * OC), dinp(inp.size()), dweight = dweight_prefill;
    llm::cpu::matmul_forward(out.data(), inp.data(), weight.data(), N, C, OC);
    llm::cpu::matmul_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(),
                              N, C, OC);

    DeviceBuffer<float> d_inp(inp), d_weight(weight), d_dout(dout);
    DeviceBuffer<float> d_out(Floats(out.size(), nan));    // overwritten: NaN must not survive
    DeviceBuffer<float> d_dinp(Floats(dinp.size(), nan));  // overwritten
    DeviceBuffer<float> d_dweight(dweight_prefill);        // accumulated
    gpu().f32.matmul_forward(d_out.get(), d_inp.get(), d_weight.get(), N, C, OC);
    gpu().f32.matmul_backward(d_dinp.get(), d_dweight.get(), d_dout.get(), d_inp.get(),
                              d_weight.get(), N, C, OC);
    const Floats gpu_out = d_out.download(), gpu_dweight = d_dweight.download();
    expect_within(to_doubles(gpu_out), to_doubles(out), reassociation_bounds(magnitude.out, C),
                  "out");
    expect_within(to_doubles(d_dinp.download()), to_doubles(dinp),
                  reassociation_bounds(magnitude.dinp, OC), "dinp");
    expect_within(to_doubles(gpu_dweight), to_doubles(dweight),
                  reassociation_bounds(magnitude.dweight, N + 1), "dweight (+=)");

    // Same inputs, same bits (cached plan, fixed algorithm); dinp == nullptr
    // computes only dweight, with the same GEMM.
    d_out.upload(Floats(out.size(), nan));
    gpu().f32.matmul_forward(d_out.get(), d_inp.get(), d_weight.get(), N, C, OC);
    expect_identical_bits(d_out.download(), gpu_out, "out, second run");
    d_dweight.upload(dweight_prefill);
    gpu().f32.matmul_backward(nullptr, d_dweight.get(), d_dout.get(), d_inp.get(), d_weight.get(),
                              N, C, OC);
    expect_identical_bits(d_dweight.download(), gpu_dweight, "dweight with dinp == nullptr");
  }
}

TEST(GpuMatmul, Bf16MatchesCpuTwinAndKeepsContracts) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(102);
  const Bf16 nan = llm::to_bf16(std::numeric_limits<float>::quiet_NaN());
  for (const MatmulShape& s : kGpuMatmulShapes) {
    const auto [N, C, OC] = s;
    SCOPED_TRACE(describe(s));
    const Bf16s inp = to_bf16s(random_floats((size_t)N * C, rng));
    const Bf16s weight = to_bf16s(random_floats((size_t)OC * C, rng));
    const Bf16s dout = to_bf16s(random_floats((size_t)N * OC, rng));
    const Floats dweight_prefill = random_floats(weight.size(), rng);
    const MatmulMagnitudes magnitude =
        matmul_magnitudes(to_doubles(inp), to_doubles(weight), to_doubles(dout),
                          to_doubles(dweight_prefill), N, C, OC);

    Bf16s out((size_t)N * OC), dinp(inp.size());
    Floats dweight = dweight_prefill;
    llm::cpu::matmul_forward<Bf16>(out.data(), inp.data(), weight.data(), N, C, OC);
    llm::cpu::matmul_backward<Bf16>(dinp.data(), dweight.data(), dout.data(), inp.data(),
                                    weight.data(), N, C, OC);

    DeviceBuffer<Bf16> d_inp(inp), d_weight(weight), d_dout(dout);
    DeviceBuffer<Bf16> d_out(Bf16s(out.size(), nan)), d_dinp(Bf16s(dinp.size(), nan));
    DeviceBuffer<float> d_dweight(dweight_prefill);
    gpu().bf16.matmul_forward(d_out.get(), d_inp.get(), d_weight.get(), N, C, OC);
    gpu().bf16.matmul_backward(d_dinp.get(), d_dweight.get(), d_dout.get(), d_inp.get(),
                               d_weight.get(), N, C, OC);
    const Bf16s gpu_out = d_out.download();
    const Floats gpu_dweight = d_dweight.download();
    const Doubles expected_out = to_doubles(out), expected_dinp = to_doubles(dinp);
    expect_within(to_doubles(gpu_out), expected_out,
                  bf16_result_bounds(magnitude.out, C, expected_out), "out");
    expect_within(to_doubles(d_dinp.download()), expected_dinp,
                  bf16_result_bounds(magnitude.dinp, OC, expected_dinp), "dinp");
    // dweight is fp32: bf16 products are exact, so only the summation order differs.
    expect_within(to_doubles(gpu_dweight), to_doubles(dweight),
                  reassociation_bounds(magnitude.dweight, N + 1), "dweight (fp32, +=)");

    d_out.upload(Bf16s(out.size(), nan));
    gpu().bf16.matmul_forward(d_out.get(), d_inp.get(), d_weight.get(), N, C, OC);
    expect_identical_bits(d_out.download(), gpu_out, "out, second run");
    d_dweight.upload(dweight_prefill);
    gpu().bf16.matmul_backward(nullptr, d_dweight.get(), d_dout.get(), d_inp.get(), d_weight.get(),
                               N, C, OC);
    expect_identical_bits(d_dweight.download(), gpu_dweight, "dweight with dinp == nullptr");
  }
}

// ---- cross-entropy --------------------------------------------------------------

struct LossShape {
  int N, V;
};
// Tiny rows (fewer logits than threads), odd sizes, GPT-2's 50257 and Llama
// 3's 128256 vocabularies (few rows: the CPU twin is the slow side).
constexpr LossShape kLossShapes[] = {{1, 1},     {3, 7},     {4, 513},   {5, 1000},
                                     {2, 32000}, {2, 50257}, {1, 128256}};

std::string describe(const LossShape& s) {
  return "N=" + std::to_string(s.N) + " V=" + std::to_string(s.V);
}

// Losses (log V, at most ~12, plus the logit spread): both sides take
// max + log(sum of exp(x - max)) with 2-ulp exps; the sums differ in order
// (CPU: double; GPU: fp32 per thread with online rescaling, then a tree), a
// relative error of a few 1e-7 in the sum, so a few 1e-7 absolute in the log,
// plus the final fp32 rounding of a value up to ~1e5 for the huge logits.
constexpr Tolerance kLossTolerance{1e-5, 1e-6};

// dlogits: away from the target each is exp(x - max) * (dloss / sum), whose
// relative error is that of the exp (2 ulp per side) and of the sum: 4e-6
// relative is a wide margin. At the target, p * dloss - dloss cancels, so the
// same error is absolute in dloss. 1e-37 absolute: the CPU's exp flushes
// arguments below -87 to 0 where the GPU's expf still gives a denormal-sized value.
Doubles dlogit_bounds(const Doubles& expected, const Ints& targets, int V, float dloss) {
  Doubles bound(expected.size());
  for (size_t i = 0; i < expected.size(); i++) {
    const bool at_target = (int)(i % V) == targets[i / V];
    bound[i] = 1e-37 + 4e-6 * (at_target ? std::fabs(dloss) : std::fabs(expected[i]));
  }
  return bound;
}

// In bf16 the CPU and GPU round fp32 dlogits within dlogit_bounds of each
// other: add two bf16 ulps, as for the matmul outputs.
Doubles bf16_dlogit_bounds(const Doubles& expected, const Ints& targets, int V, float dloss) {
  Doubles bound = dlogit_bounds(expected, targets, V, dloss);
  for (size_t i = 0; i < bound.size(); i++) bound[i] += 2.0 * kBf16Ulp * std::fabs(expected[i]);
  return bound;
}

void expect_all_finite(const Doubles& x, const std::string& what) {
  for (size_t i = 0; i < x.size(); i++)
    if (!std::isfinite(x[i])) {
      ADD_FAILURE() << what << "[" << i << "] = " << x[i];
      return;
    }
}

// One precision (T = float or Bf16) of both entry points on logits spread
// uniformly in [-spread, spread].
template <class T>
void check_cross_entropy(float spread, uint32_t seed) {
  std::mt19937 rng(seed);
  const float dloss = 0.37f;
  for (const LossShape& s : kLossShapes) {
    const auto [N, V] = s;
    SCOPED_TRACE(describe(s) + " spread " + std::to_string(spread));
    std::vector<T> logits;
    {
      const Floats values = random_floats((size_t)N * V, rng, -spread, spread);
      if constexpr (std::is_same_v<T, Bf16>)
        logits = to_bf16s(values);
      else
        logits = values;
    }
    const Ints targets = random_ints(N, V, rng);

    Floats losses(N), losses_fused(N);
    std::vector<T> dlogits = logits;
    if constexpr (std::is_same_v<T, Bf16>) {
      llm::cpu::cross_entropy_forward<Bf16>(losses.data(), logits.data(), targets.data(), N, V);
      llm::cpu::cross_entropy_forward_backward<Bf16>(losses_fused.data(), dlogits.data(),
                                                     targets.data(), N, V, dloss);
    } else {
      llm::cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V);
      llm::cpu::cross_entropy_forward_backward(losses_fused.data(), dlogits.data(), targets.data(),
                                               N, V, dloss);
    }

    DeviceBuffer<T> d_logits(logits);
    DeviceBuffer<int32_t> d_targets(targets);
    // Losses are refilled with NaN before every run, so each run must write them.
    const Floats nan_losses(N, std::numeric_limits<float>::quiet_NaN());
    DeviceBuffer<float> d_losses(N);
    auto forward = [&] {
      d_losses.upload(nan_losses);
      if constexpr (std::is_same_v<T, Bf16>)
        gpu().bf16.cross_entropy_forward(d_losses.get(), d_logits.get(), d_targets.get(), N, V);
      else
        gpu().f32.cross_entropy_forward(d_losses.get(), d_logits.get(), d_targets.get(), N, V);
      return d_losses.download();
    };
    auto forward_backward = [&] {
      d_losses.upload(nan_losses);
      d_logits.upload(logits);
      if constexpr (std::is_same_v<T, Bf16>)
        gpu().bf16.cross_entropy_forward_backward(d_losses.get(), d_logits.get(), d_targets.get(),
                                                  N, V, dloss);
      else
        gpu().f32.cross_entropy_forward_backward(d_losses.get(), d_logits.get(), d_targets.get(), N,
                                                 V, dloss);
      return std::make_pair(d_losses.download(), d_logits.download());
    };

    const Floats gpu_losses = forward();
    expect_identical_bits(d_logits.download(), logits, "logits untouched by the forward");
    expect_all_finite(to_doubles(gpu_losses), "losses");
    expect_within(to_doubles(gpu_losses), to_doubles(losses),
                  tolerance_bounds(to_doubles(losses), kLossTolerance), "losses");
    expect_identical_bits(forward(), gpu_losses, "losses, second run");

    const auto [gpu_losses_fused, gpu_dlogits] = forward_backward();
    // The fused loss is the same computation as the forward's.
    expect_identical_bits(gpu_losses_fused, gpu_losses, "fused losses");
    const Doubles gpu_d = to_doubles(gpu_dlogits), cpu_d = to_doubles(dlogits);
    expect_all_finite(gpu_d, "dlogits");
    if constexpr (std::is_same_v<T, Bf16>)
      expect_within(gpu_d, cpu_d, bf16_dlogit_bounds(cpu_d, targets, V, dloss),
                    "dlogits (in place)");
    else
      expect_within(gpu_d, cpu_d, dlogit_bounds(cpu_d, targets, V, dloss), "dlogits (in place)");
    expect_identical_bits(forward_backward().second, gpu_dlogits, "dlogits, second run");
  }
}

TEST(GpuCrossEntropy, Fp32MatchesCpu) {
  LLM_SKIP_WITHOUT_GPU();
  check_cross_entropy<float>(4.0f, 201);
}

TEST(GpuCrossEntropy, Bf16MatchesCpuTwin) {
  LLM_SKIP_WITHOUT_GPU();
  check_cross_entropy<Bf16>(4.0f, 202);
}

// Logits of +/-5e4 overflow exp unless max-subtracted; losses of ~1e5 must
// still be finite and match, and dlogits stay finite (mostly exact zeros).
TEST(GpuCrossEntropy, HugeLogitsStayFinite) {
  LLM_SKIP_WITHOUT_GPU();
  check_cross_entropy<float>(5e4f, 203);
  check_cross_entropy<Bf16>(5e4f, 204);
}

// ---- adamw / sum_squares --------------------------------------------------------

struct AdamwSettings {
  float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f,
        grad_scale = 0.5f;
};

// Same formula, same order of fp32 operations on both sides; only FMA
// contraction may differ (g++ -march=native and nvcc each fuse some a*b+c),
// a rounding or two in m, v and the update. 1e-6 relative is ~8 ulps. The
// absolute floors cover values that cancel towards 0: m (terms <= 0.1, so an
// ulp of them is < 1e-8) and params near 0 (left with the update, up to a few
// lr, whose few-ulp error is < 2e-8). v is a sum of positive terms: relative.
constexpr Tolerance kParamTolerance{2e-8, 1e-6};
constexpr Tolerance kMomentTolerance{1e-7, 1e-6};
constexpr Tolerance kSecondMomentTolerance{1e-12, 1e-6};

TEST(GpuAdamw, MatchesCpuOverStepsAndSlices) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(301);
  const AdamwSettings a;
  for (size_t n : {size_t{1}, size_t{1000}, size_t{100003}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    Floats params = random_floats(n, rng), m = random_floats(n, rng, -0.1f, 0.1f),
           v = random_floats(n, rng, 0.0f, 0.01f);
    DeviceBuffer<float> d_params(params), d_m(m), d_v(v), d_grads(n);
    for (int t = 1; t <= 3; t++) {
      SCOPED_TRACE(testing::Message() << "step " << t);
      const Floats grads = random_floats(n, rng);
      d_grads.upload(grads);
      llm::cpu::adamw_update(params.data(), grads.data(), m.data(), v.data(), n, a.lr, a.beta1,
                             a.beta2, a.eps, a.weight_decay, a.grad_scale, t);
      gpu().adamw_update(d_params.get(), d_grads.get(), d_m.get(), d_v.get(), n, a.lr, a.beta1,
                         a.beta2, a.eps, a.weight_decay, a.grad_scale, t);
      // Compare, then continue from the CPU's state so errors do not compound.
      const Doubles p = to_doubles(params), mm = to_doubles(m), vv = to_doubles(v);
      expect_within(to_doubles(d_params.download()), p, tolerance_bounds(p, kParamTolerance),
                    "params");
      expect_within(to_doubles(d_m.download()), mm, tolerance_bounds(mm, kMomentTolerance), "m");
      expect_within(to_doubles(d_v.download()), vv, tolerance_bounds(vv, kSecondMomentTolerance),
                    "v");
      d_params.upload(params);
      d_m.upload(m);
      d_v.upload(v);
    }

    // Elementwise: updating two slices gives the bits of one update of the whole.
    if (n > 1) {
      const size_t split = n / 3;
      const Floats grads = random_floats(n, rng);
      d_grads.upload(grads);
      gpu().adamw_update(d_params.get(), d_grads.get(), d_m.get(), d_v.get(), n, a.lr, a.beta1,
                         a.beta2, a.eps, a.weight_decay, a.grad_scale, 4);
      const Floats whole = d_params.download(), whole_m = d_m.download(), whole_v = d_v.download();
      d_params.upload(params);
      d_m.upload(m);
      d_v.upload(v);
      for (auto [begin, end] : {std::pair{size_t{0}, split}, std::pair{split, n}})
        gpu().adamw_update(d_params.get() + begin, d_grads.get() + begin, d_m.get() + begin,
                           d_v.get() + begin, end - begin, a.lr, a.beta1, a.beta2, a.eps,
                           a.weight_decay, a.grad_scale, 4);
      expect_identical_bits(d_params.download(), whole, "params, sliced");
      expect_identical_bits(d_m.download(), whole_m, "m, sliced");
      expect_identical_bits(d_v.download(), whole_v, "v, sliced");
    }
  }
}

TEST(GpuSumSquares, MatchesCpuAndRepeatsBitForBit) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(302);
  // 1 << 22 fills the first pass's capped grid; the others leave ragged blocks.
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{13}, size_t{4097}, size_t{100003}, (size_t{1} << 22) + 5}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const Floats x = random_floats(n, rng, -3.0f, 3.0f);
    const double expected = llm::cpu::sum_squares(x.data(), n);
    DeviceBuffer<float> d_x(x);
    const double first = gpu().sum_squares(d_x.get(), n);
    // Squares of floats are exact in double; only the order of <= 4M double
    // additions differs: a relative error far below 1e-12.
    EXPECT_NEAR(first, expected, 1e-12 * expected);
    const double again = gpu().sum_squares(d_x.get(), n);
    EXPECT_EQ(std::memcmp(&again, &first, sizeof(double)), 0) << first << " then " << again;
  }
}

// Inputs built so every partial sum is exact in double (multiples of 1/16 up
// to 4 in magnitude: squares are multiples of 2^-8 below 16, and 2^20 of them
// sum below 2^24, far inside double's 53 bits): any order must give the same
// bits as the CPU, so a dropped or doubled element cannot hide in a tolerance.
TEST(GpuSumSquares, ExactInputsGiveTheExactSum) {
  LLM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(303);
  std::uniform_int_distribution<int> sixteenths(-64, 64);
  for (size_t n : {size_t{7}, size_t{65537}, size_t{1} << 20}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    Floats x(n);
    for (float& v : x) v = sixteenths(rng) / 16.0f;
    DeviceBuffer<float> d_x(x);
    EXPECT_EQ(gpu().sum_squares(d_x.get(), n), llm::cpu::sum_squares(x.data(), n));
  }
}

}  // namespace
