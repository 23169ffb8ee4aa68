// The CUDA twins of attention (forward: out and lse; backward: dqkv) against
// their CPU twins on the same random host inputs, fp32 and bf16, through the
// CUDA backend's op table, so the suite builds without CUDA and skips without
// a GPU. Backward gets the CPU forward's out and lse on both sides, so only
// the backward differs.
// Tolerances, each explained where it is defined: fp32 sums in another order
// and exps of another implementation; in bf16 also the GPU's rounding of the
// probabilities P and score gradients dS to bf16 before its tensor-core
// products (the CPU twin keeps them in fp32), bounded element by element from
// a double-precision recomputation of P and dS.
// Also checked: outputs are overwritten (NaN prefills must not survive, and
// garbage prefills give the same bits), repeated runs give identical bits,
// and an unsupported head dim is an error that names it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "runtime/bf16.h"
#include "runtime/error.h"
#include "model/backend.h"
#include "model/kernels/attention.h"
#include "test/gpu_test_support.h"
#include "test/kernel_test_support.h"

namespace {

using llm::Bf16;
using namespace llm::test_support;

const llm::Backend& gpu() { return llm::backend_cuda(); }

// The kernels tile 32 or 64 queries x 32 or 64 keys and pad the head dim to
// 16, 32, 64 or 128: T == 1, partial last tiles (17, 33, 40, 70, 129), whole
// tiles (256), grouped, multi-head and multi-query heads, every padded head
// dim, and head dims that are not whole 16-byte packs of bf16 (24) or of
// either type (5), which take the element-wise load path.
constexpr AttentionShape kShapes[] = {
    {1, 1, 2, 1, 32},     // T == 1: one key
    {2, 17, 4, 2, 64},    // one partial tile, groups of 2 query heads
    {1, 70, 4, 4, 64},    // multi-head (H == KV), a whole and a partial tile
    {2, 129, 8, 2, 128},  // D = 128 (the smaller fp32 tiles), groups of 4
    {1, 256, 2, 1, 64},   // multi-query, whole tiles only
    {2, 33, 4, 2, 16},    // D = 16, as configs/tiny.toml
    {1, 40, 3, 1, 24},    // D padded to 32
    {2, 9, 2, 2, 5},      // odd D
};

// fp32 against fp32: the same math in another order (the GPU's tiles, FMAs
// and warp sums against the CPU's 8-wide vector blocks) and with another
// 2-ulp exp (exp2f against a Cephes polynomial). A score sums <= 128 products
// of inputs in [-2, 2]; its rounding (~1e-5 absolute at worst) moves a
// probability by ~1e-6 relative after the 1/sqrt(D) scale, and each output
// sums at most H/KV * T = 1032 terms whose own roundings stay near 1e-6 of
// their magnitudes. 1e-4 absolute + relative keeps a wide margin over that,
// while one wrong or missing term (about 1/T of an output: >= 4e-3 of it
// here) fails.
constexpr Tolerance kFp32Tolerance{1e-4, 1e-4};

// bf16: the inputs are bf16 on both sides, and both sides do fp32 math on
// them, so everything kFp32Tolerance allows, plus:
//  - the GPU rounds P (in out = P V / l and dV = P^T dO) and dS (in
//    dQ = dS K and dK = dS^T Q) to bf16 before multiplying: each rounded
//    factor moves by at most half an ulp, 2^-8 of itself, so a result moves
//    by at most 2^-8 times the sum of |terms| of its product, which
//    rounded_term_magnitudes computes in double;
//  - each side rounds its fp32 result to bf16 once: two results that differ
//    as above may land on either side of a rounding boundary, at most one bf16
//    ulp of the result apart; a second ulp is margin.
constexpr double kBf16Ulp = 0x1p-7;        // bf16 ulp of 1: 8 significant bits
constexpr double kBf16Rounding = 0x1p-8;  // round to nearest: half an ulp, relative
// lse is fp32 in both precisions and the GPU sums the unrounded P for it:
// kFp32Tolerance holds.

template <class S>
constexpr bool kIsBf16 = std::is_same_v<S, Bf16>;


// Floats in the storage type S (rounded to nearest for bf16).
template <class S>
std::vector<S> stored(const Floats& x) {
  if constexpr (kIsBf16<S>) {
    return to_bf16s(x);
  } else {
    return x;
  }
}


template <class S>
void expect_same_bits(const std::vector<S>& a, const std::vector<S>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(S)), 0) << what;
}


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

// kFp32Tolerance, plus for bf16 the rounded factors' bound and two ulps.
Doubles bounds_for(const Doubles& expected, const Doubles* rounded_term_magnitude) {
  Doubles bound = tolerance_bounds(expected, kFp32Tolerance);
  if (rounded_term_magnitude) {
    for (size_t i = 0; i < bound.size(); i++)
      bound[i] += kBf16Rounding * (*rounded_term_magnitude)[i] + 2.0 * kBf16Ulp * std::fabs(expected[i]);
  }
  return bound;
}

// ---- the twins, by storage type ------------------------------------------------------

template <class S>
void cpu_forward(std::vector<S>& out, Floats& lse, const std::vector<S>& qkv,
                 const AttentionShape& s) {
  if constexpr (kIsBf16<S>)
    llm::cpu::attention_forward<Bf16>(out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.KV, s.D);
  else
    llm::cpu::attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.H, s.KV, s.D);
}

template <class S>
void cpu_backward(std::vector<S>& dqkv, const std::vector<S>& dout, const std::vector<S>& qkv,
                  const std::vector<S>& out, const Floats& lse, const AttentionShape& s) {
  if constexpr (kIsBf16<S>)
    llm::cpu::attention_backward<Bf16>(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(),
                                       s.B, s.T, s.H, s.KV, s.D);
  else
    llm::cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B,
                                 s.T, s.H, s.KV, s.D);
}

template <class S>
void gpu_forward(DeviceBuffer<S>& out, DeviceBuffer<float>& lse, const DeviceBuffer<S>& qkv,
                 const AttentionShape& s) {
  if constexpr (kIsBf16<S>)
    gpu().bf16.attention_forward(out.get(), lse.get(), qkv.get(), s.B, s.T, s.H, s.KV, s.D);
  else
    gpu().f32.attention_forward(out.get(), lse.get(), qkv.get(), s.B, s.T, s.H, s.KV, s.D);
}

template <class S>
void gpu_backward(DeviceBuffer<S>& dqkv, const DeviceBuffer<S>& dout, const DeviceBuffer<S>& qkv,
                  const DeviceBuffer<S>& out, const DeviceBuffer<float>& lse,
                  const AttentionShape& s) {
  if constexpr (kIsBf16<S>)
    gpu().bf16.attention_backward(dqkv.get(), dout.get(), qkv.get(), out.get(), lse.get(), s.B, s.T,
                                  s.H, s.KV, s.D);
  else
    gpu().f32.attention_backward(dqkv.get(), dout.get(), qkv.get(), out.get(), lse.get(), s.B, s.T,
                                 s.H, s.KV, s.D);
}

size_t qkv_size(const AttentionShape& s) { return (size_t)s.B * s.T * (s.H + 2 * s.KV) * s.D; }
size_t out_size(const AttentionShape& s) { return (size_t)s.B * s.T * s.H * s.D; }
size_t lse_size(const AttentionShape& s) { return (size_t)s.B * s.H * s.T; }

// Random inputs of one shape: qkv in [-2, 2] (scores spread over a few units,
// so softmax is neither flat nor one-hot), dout in [-1, 1].
template <class S>
struct Inputs {
  std::vector<S> qkv, dout;
  Inputs(const AttentionShape& s, std::mt19937& rng)
      : qkv(stored<S>(random_floats(qkv_size(s), rng, -2.0f, 2.0f))),
        dout(stored<S>(random_floats(out_size(s), rng, -1.0f, 1.0f))) {}
};

// Every shape: GPU forward and backward against the CPU twin, outputs
// prefilled with NaN (which fails any comparison unless overwritten).
template <class S>
void check_against_cpu_twin(uint32_t seed) {
  std::mt19937 rng(seed);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const AttentionShape& s : kShapes) {
    SCOPED_TRACE(describe(s));
    const Inputs<S> in(s, rng);
    std::vector<S> out(out_size(s)), dqkv(qkv_size(s));
    Floats lse(lse_size(s));
    cpu_forward(out, lse, in.qkv, s);
    cpu_backward(dqkv, in.dout, in.qkv, out, lse, s);

    DeviceBuffer<S> d_qkv(in.qkv), d_dout(in.dout), d_cpu_out(out);
    DeviceBuffer<float> d_cpu_lse(lse);
    DeviceBuffer<S> d_out(stored<S>(Floats(out.size(), nan)));
    DeviceBuffer<float> d_lse(Floats(lse.size(), nan));
    DeviceBuffer<S> d_dqkv(stored<S>(Floats(dqkv.size(), nan)));
    gpu_forward(d_out, d_lse, d_qkv, s);
    gpu_backward(d_dqkv, d_dout, d_qkv, d_cpu_out, d_cpu_lse, s);

    const Doubles expected_out = to_doubles(out), expected_dqkv = to_doubles(dqkv);
    const Doubles expected_lse = to_doubles(lse);
    RoundedTermMagnitudes magnitude;
    if constexpr (kIsBf16<S>)
      magnitude = rounded_term_magnitudes(to_doubles(in.qkv), to_doubles(in.dout), expected_out, s);
    const bool bf16 = kIsBf16<S>;
    expect_within(to_doubles(d_out.download()), expected_out,
                  bounds_for(expected_out, bf16 ? &magnitude.out : nullptr), "out");
    expect_within(to_doubles(d_lse.download()), expected_lse, bounds_for(expected_lse, nullptr),
                  "lse");
    expect_within(to_doubles(d_dqkv.download()), expected_dqkv,
                  bounds_for(expected_dqkv, bf16 ? &magnitude.dqkv : nullptr), "dqkv");
  }
}

TEST(GpuAttention, Fp32MatchesCpuTwin) {
  LLM_SKIP_WITHOUT_GPU();
  check_against_cpu_twin<float>(401);
}

TEST(GpuAttention, Bf16MatchesCpuTwinWithinRoundingOfPAndDs) {
  LLM_SKIP_WITHOUT_GPU();
  check_against_cpu_twin<Bf16>(402);
}

// Determinism and overwrite: forward and backward run twice, first over NaN
// prefills, then over huge garbage; every output must have the same bits
// (the second run would differ wherever an output were accumulated into or
// left unwritten). Backward gets the GPU forward's own out and lse here.
template <class S>
void check_repeats_and_overwrites(uint32_t seed) {
  std::mt19937 rng(seed);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const AttentionShape& s : {AttentionShape{2, 129, 8, 2, 128}, AttentionShape{1, 70, 4, 4, 64},
                                  AttentionShape{2, 33, 4, 2, 16}}) {
    SCOPED_TRACE(describe(s));
    const Inputs<S> in(s, rng);
    DeviceBuffer<S> d_qkv(in.qkv), d_dout(in.dout);
    DeviceBuffer<S> d_out(out_size(s)), d_dqkv(qkv_size(s));
    DeviceBuffer<float> d_lse(lse_size(s));
    auto run = [&](float fill) {
      d_out.upload(stored<S>(Floats(d_out.size(), fill)));
      d_lse.upload(Floats(d_lse.size(), fill));
      d_dqkv.upload(stored<S>(Floats(d_dqkv.size(), fill)));
      gpu_forward(d_out, d_lse, d_qkv, s);
      gpu_backward(d_dqkv, d_dout, d_qkv, d_out, d_lse, s);
      return std::make_tuple(d_out.download(), d_lse.download(), d_dqkv.download());
    };
    const auto [out, lse, dqkv] = run(nan);
    for (float x : lse) ASSERT_TRUE(std::isfinite(x)) << "lse not written";
    for (const S& x : dqkv) ASSERT_TRUE(std::isfinite(llm::to_float(x))) << "dqkv not written";
    const auto [out2, lse2, dqkv2] = run(-3e38f);
    expect_same_bits(out2, out, "out, second run");
    expect_same_bits(lse2, lse, "lse, second run");
    expect_same_bits(dqkv2, dqkv, "dqkv, second run over garbage");
  }
}

TEST(GpuAttention, Fp32RepeatsBitForBitAndOverwrites) {
  LLM_SKIP_WITHOUT_GPU();
  check_repeats_and_overwrites<float>(403);
}

TEST(GpuAttention, Bf16RepeatsBitForBitAndOverwrites) {
  LLM_SKIP_WITHOUT_GPU();
  check_repeats_and_overwrites<Bf16>(404);
}

// Head dims above 128 have no kernel: both entry points throw, naming D.
TEST(GpuAttention, UnsupportedHeadDimIsAnErrorNamingIt) {
  LLM_SKIP_WITHOUT_GPU();
  const AttentionShape s{1, 4, 2, 1, 160};
  DeviceBuffer<float> qkv(qkv_size(s)), out(out_size(s)), lse(lse_size(s)), dqkv(qkv_size(s));
  auto expect_error = [](auto call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << " accepted D=160";
    } catch (const llm::Error& e) {
      EXPECT_NE(std::string(e.what()).find("D=160"), std::string::npos) << what << ": " << e.what();
    }
  };
  expect_error(
      [&] { gpu().f32.attention_forward(out.get(), lse.get(), qkv.get(), 1, 4, 2, 1, 160); },
      "forward");
  expect_error(
      [&] {
        gpu().f32.attention_backward(dqkv.get(), out.get(), qkv.get(), out.get(), lse.get(), 1, 4,
                                     2, 1, 160);
      },
      "backward");
}

}  // namespace
