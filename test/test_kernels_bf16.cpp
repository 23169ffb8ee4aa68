// The bf16 entry points of the CPU kernels against their fp32 twins on the
// same inputs: every input is a bf16-representable float (rounded through bf16
// first), so widening is exact and both precisions do the same fp32 math; the
// differences left are the final rounding of bf16 outputs and, where a row
// reduction reads bf16 storage directly, the order of its fp32 sums.
// Two kinds of check, named by what they promise:
//  - expect_rounded_once: the bf16 output is exactly to_bf16(fp32 output), for
//    ops whose math is identical up to the final store (elementwise ops, and
//    ops whose reductions all run over the same fp32 scratch in both).
//  - expect_close with kOneRounding: within one bf16 rounding of the fp32
//    output (2^-8 relative, half an ulp of bf16's 8-bit significand) plus a
//    small term for fp32 reassociation, for ops whose reductions may be summed
//    in a different order by the bf16 instantiation; fp32 outputs of those ops
//    (rstd, dweight) are within kReassociation.
// Plus the += / overwrite contracts, thread-count independence of backward
// reductions, cast round trips, and finite cross-entropy on huge logits.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/bf16.h"
#include "model/kernels/attention.h"
#include "model/kernels/cast.h"
#include "model/kernels/cross_entropy.h"
#include "model/kernels/embedding.h"
#include "model/kernels/fill.h"
#include "model/kernels/matmul.h"
#include "model/kernels/residual.h"
#include "model/kernels/rmsnorm.h"
#include "model/kernels/rope.h"
#include "model/kernels/swiglu.h"
#include "test/kernel_test_support.h"

namespace {

using llm::Bf16;
using namespace llm::test_support;
using Bf16s = std::vector<Bf16>;

// Two fp32 evaluations of the same short sums (<= ~200 terms of magnitude
// <= ~4) in different orders differ by a few ulps of the partial sums: 1e-5
// relative plus 1e-5 absolute (for results that cancel to near 0) bounds that
// with a wide margin and still catches any wrong term or scale.
constexpr Tolerance kReassociation{1e-5, 1e-5};
// One round-to-nearest-even to bf16 moves a value by at most half an ulp,
// 2^-8 of its magnitude; on top, the fp32 result it rounds may itself differ
// by kReassociation (which can also tip a tie the other way: still covered).
const Tolerance kOneRounding{kReassociation.abs, std::ldexp(1.0, -8) + kReassociation.rel};

// Floats uniform in [lo, hi), rounded through bf16 so they are exactly
// representable in both precisions.
Floats random_bf16_values(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Floats x(n);
  for (float& v : x) v = llm::to_float(llm::to_bf16(dist(rng)));
  return x;
}

Bf16s to_bf16(const Floats& x) {
  Bf16s out(x.size());
  for (size_t i = 0; i < x.size(); i++) out[i] = llm::to_bf16(x[i]);
  return out;
}

Floats to_floats(const Bf16s& x) {
  Floats out(x.size());
  for (size_t i = 0; i < x.size(); i++) out[i] = llm::to_float(x[i]);
  return out;
}

Bf16s nan_bf16(size_t n) { return Bf16s(n, llm::to_bf16(kNaN)); }

// actual == to_bf16(fp32) bit for bit; reports how many differ and the first.
void expect_rounded_once(const Bf16s& actual, const Floats& fp32, const std::string& what) {
  ASSERT_EQ(actual.size(), fp32.size()) << what;
  size_t failures = 0, first = 0;
  for (size_t i = 0; i < actual.size(); i++) {
    if (actual[i].bits != llm::to_bf16(fp32[i]).bits && failures++ == 0) first = i;
  }
  EXPECT_EQ(failures, 0u) << what << ": first at [" << first << "] bf16 "
                          << llm::to_float(actual[first]) << " fp32 " << fp32[first];
}

void expect_close(const Floats& actual, const Floats& expected, Tolerance tol,
                  const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t failures = 0, worst = 0;
  double worst_excess = -INFINITY;
  for (size_t i = 0; i < actual.size(); i++) {
    const double allowed = tol.abs + tol.rel * std::fabs(expected[i]);
    const double error = std::fabs((double)actual[i] - expected[i]);
    const double excess = std::isnan(error) ? INFINITY : error - allowed;
    if (excess > 0) failures++;
    if (excess > worst_excess) worst_excess = excess, worst = i;
  }
  EXPECT_EQ(failures, 0u) << what << ": worst at [" << worst << "] actual " << actual[worst]
                          << " expected " << expected[worst];
}

void expect_close(const Bf16s& actual, const Floats& expected, Tolerance tol,
                  const std::string& what) {
  expect_close(to_floats(actual), expected, tol, what);
}

// f() with 1, 2 and 3 threads (3 gives uneven splits) must give the same bits.
template <class F>
void expect_thread_count_independent(F f, const std::string& what) {
  const Floats first = with_threads(1, f);
  for (int threads : {2, 3})
    expect_same_bits(with_threads(threads, f), first,
                     what + ", threads " + std::to_string(threads));
}

void append(Floats& out, const Floats& x) { out.insert(out.end(), x.begin(), x.end()); }

// ---- cast ---------------------------------------------------------------------

TEST(KernelBf16Cast, F32ToBf16RoundsEachElementLikeFloatToBf16) {
  std::mt19937 rng(101);
  // Any bits (inf, NaN, denormals included), an odd count for a vector tail,
  // and a few chosen values: inf, -0 and a tie that rounds to even.
  Floats in(1001);
  for (float& v : in) v = std::bit_cast<float>((uint32_t)rng());
  in[0] = INFINITY, in[1] = -0.0f, in[2] = std::bit_cast<float>(0x3F818000u);
  Bf16s out = nan_bf16(in.size() + 1);
  llm::cpu::cast_f32_to_bf16(out.data(), in.data(), in.size());
  for (size_t i = 0; i < in.size(); i++)
    ASSERT_EQ(out[i].bits, llm::float_to_bf16(in[i])) << "element " << i;
  EXPECT_TRUE(std::isnan(llm::to_float(out.back()))) << "wrote past n";
}

TEST(KernelBf16Cast, Bf16ToF32IsExactForEveryPattern) {
  Bf16s in(1 << 16);
  for (uint32_t bits = 0; bits < in.size(); bits++) in[bits].bits = (uint16_t)bits;
  Floats out(in.size() + 1, 1.0f);
  llm::cpu::cast_bf16_to_f32(out.data(), in.data(), in.size());
  for (uint32_t bits = 0; bits < in.size(); bits++) {
    ASSERT_EQ(std::bit_cast<uint32_t>(out[bits]), bits << 16) << "pattern " << bits;
  }
  EXPECT_EQ(out.back(), 1.0f) << "wrote past n";
}

// ---- fill ---------------------------------------------------------------------

TEST(KernelBf16Fill, ZeroesExactlyTheRange) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    Bf16s x = nan_bf16(n + 2);
    llm::cpu::fill_zero<Bf16>(x.data() + 1, n);
    EXPECT_TRUE(std::isnan(llm::to_float(x.front())));
    EXPECT_TRUE(std::isnan(llm::to_float(x.back())));
    for (size_t i = 1; i <= n; i++) ASSERT_EQ(x[i].bits, 0) << "index " << i;  // +0
  }
}

// ---- embedding ----------------------------------------------------------------

TEST(KernelBf16Embedding, ForwardCopiesRowsExactly) {
  std::mt19937 rng(102);
  const int N = 40, C = 70, V = 3;
  const Floats wte = random_bf16_values((size_t)V * C, rng);
  const Ints tokens = random_ints(N, V, rng);
  Floats out((size_t)N * C, kNaN);
  llm::cpu::embedding_forward(out.data(), tokens.data(), wte.data(), N, C);
  Bf16s out_bf16 = nan_bf16(out.size());
  llm::cpu::embedding_forward<Bf16>(out_bf16.data(), tokens.data(), to_bf16(wte).data(), N, C);
  expect_rounded_once(out_bf16, out, "out");
}

// dwte is fp32 and sums the widened (exact) dout in the same order as fp32.
TEST(KernelBf16Embedding, BackwardAccumulatesExactlyLikeFp32) {
  std::mt19937 rng(103);
  const int N = 40, C = 70, V = 3;  // tokens repeat
  const Ints tokens = random_ints(N, V, rng);
  const Floats dout = random_bf16_values((size_t)N * C, rng);
  const Floats prefill = random_bf16_values((size_t)V * C, rng);
  Floats dwte = prefill, dwte_bf16 = prefill;
  llm::cpu::embedding_backward(dwte.data(), dout.data(), tokens.data(), N, C);
  llm::cpu::embedding_backward<Bf16>(dwte_bf16.data(), to_bf16(dout).data(), tokens.data(), N, C);
  expect_same_bits(dwte_bf16, dwte, "dwte (+=)");
}

TEST(KernelBf16Embedding, BackwardIsThreadCountIndependent) {
  std::mt19937 rng(104);
  const int N = 301, C = 150, V = 7;
  const Ints tokens = random_ints(N, V, rng);
  const Bf16s dout = to_bf16(random_bf16_values((size_t)N * C, rng));
  expect_thread_count_independent(
      [&] {
        Floats dwte((size_t)V * C, 0.0f);
        llm::cpu::embedding_backward<Bf16>(dwte.data(), dout.data(), tokens.data(), N, C);
        return dwte;
      },
      "dwte");
}

// ---- rmsnorm ------------------------------------------------------------------

constexpr RowShape kRmsnormShapes[] = {{7, 13}, {1, 1}, {5, 64}, {3, 130}};
constexpr float kRmsnormEps = 1e-5f;

// The row's sum of squares reads bf16 directly (its summation order is the
// compiler's choice per instantiation), so the results are compared within
// kOneRounding (out) and kReassociation (rstd), not bit for bit.
TEST(KernelBf16Rmsnorm, ForwardIsWithinOneRoundingOfFp32) {
  std::mt19937 rng(105);
  for (auto [N, C] : kRmsnormShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C);
    const Floats inp = random_bf16_values((size_t)N * C, rng, -2.0f, 2.0f);
    const Floats weight = random_bf16_values(C, rng);
    Floats out(inp.size()), rstd(N);
    llm::cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), N, C,
                              kRmsnormEps);
    Bf16s out_bf16 = nan_bf16(inp.size());
    Floats rstd_bf16(N, kNaN);
    llm::cpu::rmsnorm_forward<Bf16>(out_bf16.data(), rstd_bf16.data(), to_bf16(inp).data(),
                                    to_bf16(weight).data(), N, C, kRmsnormEps);
    expect_close(out_bf16, out, kOneRounding, "out");
    expect_close(rstd_bf16, rstd, kReassociation, "rstd");
  }
}

// dinp (bf16) += : the prefill is read, the gradient added in fp32, the sum
// rounded once; dweight (fp32) +=.
TEST(KernelBf16Rmsnorm, BackwardAccumulatesWithinOneRoundingOfFp32) {
  std::mt19937 rng(106);
  for (auto [N, C] : kRmsnormShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C);
    const Floats inp = random_bf16_values((size_t)N * C, rng, -2.0f, 2.0f);
    const Floats weight = random_bf16_values(C, rng), dout = random_bf16_values(inp.size(), rng);
    Floats out(inp.size()), rstd(N);
    llm::cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), N, C,
                              kRmsnormEps);
    const Floats dinp_prefill = random_bf16_values(inp.size(), rng);
    const Floats dweight_prefill = random_bf16_values(C, rng);
    Floats dinp = dinp_prefill, dweight = dweight_prefill;
    llm::cpu::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(),
                               rstd.data(), N, C);
    Bf16s dinp_bf16 = to_bf16(dinp_prefill);
    Floats dweight_bf16 = dweight_prefill;
    llm::cpu::rmsnorm_backward<Bf16>(dinp_bf16.data(), dweight_bf16.data(), to_bf16(dout).data(),
                                     to_bf16(inp).data(), to_bf16(weight).data(), rstd.data(), N,
                                     C);
    expect_close(dinp_bf16, dinp, kOneRounding, "dinp (+=)");
    expect_close(dweight_bf16, dweight, kReassociation, "dweight (+=)");
  }
}

TEST(KernelBf16Rmsnorm, BackwardIsThreadCountIndependent) {
  std::mt19937 rng(107);
  const int N = 97, C = 200;  // several column blocks of dweight, uneven row splits
  const Bf16s inp = to_bf16(random_bf16_values((size_t)N * C, rng));
  const Bf16s weight = to_bf16(random_bf16_values(C, rng));
  const Bf16s dout = to_bf16(random_bf16_values(inp.size(), rng));
  Bf16s out(inp.size());
  Floats rstd(N);
  llm::cpu::rmsnorm_forward<Bf16>(out.data(), rstd.data(), inp.data(), weight.data(), N, C,
                                  kRmsnormEps);
  expect_thread_count_independent(
      [&] {
        Bf16s dinp(inp.size(), Bf16{0});
        Floats dweight(C, 0.0f);
        llm::cpu::rmsnorm_backward<Bf16>(dinp.data(), dweight.data(), dout.data(), inp.data(),
                                         weight.data(), rstd.data(), N, C);
        append(dweight, to_floats(dinp));
        return dweight;
      },
      "dinp and dweight");
}

// ---- rope ---------------------------------------------------------------------

// Elementwise rotations in fp32: forward and backward are to_bf16 of fp32, and
// the v heads (past the rotated ones) keep their bits.
TEST(KernelBf16Rope, ForwardAndBackwardRoundFp32Once) {
  std::mt19937 rng(108);
  const int B = 2, T = 5, H = 4, KV = 2, D = 6, N = B * T;
  const int stride = (H + 2 * KV) * D, n_heads = H + KV;
  Floats cos((size_t)T * D / 2), sin((size_t)T * D / 2);
  llm::cpu::rope_table(cos.data(), sin.data(), T, D, 10000.0f);
  const Floats x = random_bf16_values((size_t)N * stride, rng);
  Floats forward = x, backward = x;
  llm::cpu::rope_forward(forward.data(), cos.data(), sin.data(), N, T, n_heads, D, stride);
  llm::cpu::rope_backward(backward.data(), cos.data(), sin.data(), N, T, n_heads, D, stride);
  Bf16s forward_bf16 = to_bf16(x), backward_bf16 = to_bf16(x);
  llm::cpu::rope_forward<Bf16>(forward_bf16.data(), cos.data(), sin.data(), N, T, n_heads, D,
                               stride);
  llm::cpu::rope_backward<Bf16>(backward_bf16.data(), cos.data(), sin.data(), N, T, n_heads, D,
                                stride);
  expect_rounded_once(forward_bf16, forward, "forward");
  expect_rounded_once(backward_bf16, backward, "backward");
  for (int n = 0; n < N; n++)
    for (int i = n_heads * D; i < stride; i++)
      ASSERT_EQ(llm::to_float(forward_bf16[(size_t)n * stride + i]), x[(size_t)n * stride + i])
          << "untouched v head";
}

// ---- attention ----------------------------------------------------------------

// Small shapes (grouped query, multi-head, multi-query with odd D, T == 1) and
// shapes spanning several 64 x 64 tiles and every D block of the kernel.
constexpr AttentionShape kAttentionShapes[] = {{2, 5, 4, 2, 6},    {1, 6, 3, 3, 4},
                                               {2, 4, 4, 1, 5},    {3, 1, 2, 1, 8},
                                               {1, 130, 4, 2, 64}, {1, 70, 2, 1, 123}};

// Forward widens qkv into the same fp32 scratch tiles as fp32 and does every
// sum there: out is to_bf16 of the fp32 out, lse the same bits.
TEST(KernelBf16Attention, ForwardRoundsFp32Once) {
  std::mt19937 rng(109);
  for (const AttentionShape& s : kAttentionShapes) {
    SCOPED_TRACE(describe(s));
    const auto [B, T, H, KV, D] = s;
    const Floats qkv = random_bf16_values((size_t)B * T * (H + 2 * KV) * D, rng, -2.0f, 2.0f);
    Floats out((size_t)B * T * H * D), lse((size_t)B * H * T);
    llm::cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, H, KV, D);
    Bf16s out_bf16 = nan_bf16(out.size());
    Floats lse_bf16(lse.size(), kNaN);
    llm::cpu::attention_forward<Bf16>(out_bf16.data(), lse_bf16.data(), to_bf16(qkv).data(), B, T,
                                      H, KV, D);
    expect_rounded_once(out_bf16, out, "out");
    expect_same_bits(lse_bf16, lse, "lse");
  }
}

// Both backwards get the bf16 forward's out (widened for fp32). Only
// delta = dout_t . out_t reads bf16 directly, so dqkv is within kOneRounding;
// the NaN prefill must be overwritten everywhere.
TEST(KernelBf16Attention, BackwardOverwritesWithinOneRoundingOfFp32) {
  std::mt19937 rng(110);
  for (const AttentionShape& s : kAttentionShapes) {
    SCOPED_TRACE(describe(s));
    const auto [B, T, H, KV, D] = s;
    const Floats qkv = random_bf16_values((size_t)B * T * (H + 2 * KV) * D, rng, -2.0f, 2.0f);
    const Floats dout = random_bf16_values((size_t)B * T * H * D, rng);
    const Bf16s qkv_bf16 = to_bf16(qkv), dout_bf16 = to_bf16(dout);
    Bf16s out_bf16(dout.size());
    Floats lse((size_t)B * H * T);
    llm::cpu::attention_forward<Bf16>(out_bf16.data(), lse.data(), qkv_bf16.data(), B, T, H, KV, D);
    Floats dqkv(qkv.size(), kNaN);
    llm::cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), to_floats(out_bf16).data(),
                                 lse.data(), B, T, H, KV, D);
    Bf16s dqkv_bf16 = nan_bf16(qkv.size());
    llm::cpu::attention_backward<Bf16>(dqkv_bf16.data(), dout_bf16.data(), qkv_bf16.data(),
                                       out_bf16.data(), lse.data(), B, T, H, KV, D);
    expect_close(dqkv_bf16, dqkv, kOneRounding, "dqkv");
  }
}

TEST(KernelBf16Attention, ForwardAndBackwardAreThreadCountIndependent) {
  std::mt19937 rng(111);
  const int B = 2, T = 70, H = 4, KV = 2, D = 8;  // two query tiles
  const Bf16s qkv = to_bf16(random_bf16_values((size_t)B * T * (H + 2 * KV) * D, rng, -2.0f, 2.0f));
  const Bf16s dout = to_bf16(random_bf16_values((size_t)B * T * H * D, rng));
  expect_thread_count_independent(
      [&] {
        Bf16s out(dout.size()), dqkv(qkv.size());
        Floats lse((size_t)B * H * T);
        llm::cpu::attention_forward<Bf16>(out.data(), lse.data(), qkv.data(), B, T, H, KV, D);
        llm::cpu::attention_backward<Bf16>(dqkv.data(), dout.data(), qkv.data(), out.data(),
                                           lse.data(), B, T, H, KV, D);
        append(lse, to_floats(out));
        append(lse, to_floats(dqkv));
        return lse;
      },
      "out, lse and dqkv");
}

// ---- swiglu -------------------------------------------------------------------

// Elementwise: forward and backward are to_bf16 of fp32, including gates of
// +-100 where sigmoid saturates; dh13's NaN prefill is overwritten.
TEST(KernelBf16Swiglu, ForwardAndBackwardRoundFp32Once) {
  std::mt19937 rng(112);
  const int N = 4, F = 40;
  Floats h13 = random_bf16_values((size_t)N * 2 * F, rng, -4.0f, 4.0f);
  h13[0] = -100.0f, h13[1] = 100.0f;
  const Floats dout = random_bf16_values((size_t)N * F, rng);
  Floats out((size_t)N * F), dh13(h13.size());
  llm::cpu::swiglu_forward(out.data(), h13.data(), N, F);
  llm::cpu::swiglu_backward(dh13.data(), dout.data(), h13.data(), N, F);
  Bf16s out_bf16 = nan_bf16(out.size()), dh13_bf16 = nan_bf16(h13.size());
  llm::cpu::swiglu_forward<Bf16>(out_bf16.data(), to_bf16(h13).data(), N, F);
  llm::cpu::swiglu_backward<Bf16>(dh13_bf16.data(), to_bf16(dout).data(), to_bf16(h13).data(), N,
                                  F);
  expect_rounded_once(out_bf16, out, "out");
  expect_rounded_once(dh13_bf16, dh13, "dh13");
}

// ---- matmul -------------------------------------------------------------------

// The last shape is wide enough (N x OC beyond the kernel's ~4M-float chunk of
// fp32 scratch) that the rows are processed in several chunks, the last partial.
constexpr MatmulShape kMatmulShapes[] = {{7, 13, 5}, {1, 1, 1}, {33, 17, 9}, {250, 5, 40000}};

// Both sides run sgemm on identical fp32 values, but over different row
// chunks, so sums may be split differently: outputs within kOneRounding,
// dweight (fp32, +=, summed chunk by chunk) within kReassociation.
TEST(KernelBf16Matmul, ForwardAndBackwardAreWithinOneRoundingOfFp32) {
  std::mt19937 rng(113);
  for (auto [N, C, OC] : kMatmulShapes) {
    SCOPED_TRACE(testing::Message() << "N=" << N << " C=" << C << " OC=" << OC);
    const Floats inp = random_bf16_values((size_t)N * C, rng);
    const Floats weight = random_bf16_values((size_t)OC * C, rng);
    const Floats dout = random_bf16_values((size_t)N * OC, rng);
    const Floats dweight_prefill = random_bf16_values(weight.size(), rng);
    const Bf16s inp_bf16 = to_bf16(inp), weight_bf16 = to_bf16(weight), dout_bf16 = to_bf16(dout);

    Floats out((size_t)N * OC);
    llm::cpu::matmul_forward(out.data(), inp.data(), weight.data(), N, C, OC);
    Bf16s out_bf16 = nan_bf16(out.size());
    llm::cpu::matmul_forward<Bf16>(out_bf16.data(), inp_bf16.data(), weight_bf16.data(), N, C, OC);
    expect_close(out_bf16, out, kOneRounding, "out");

    Floats dinp(inp.size()), dweight = dweight_prefill;
    llm::cpu::matmul_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(),
                              N, C, OC);
    Bf16s dinp_bf16 = nan_bf16(inp.size());
    Floats dweight_bf16 = dweight_prefill;
    llm::cpu::matmul_backward<Bf16>(dinp_bf16.data(), dweight_bf16.data(), dout_bf16.data(),
                                    inp_bf16.data(), weight_bf16.data(), N, C, OC);
    expect_close(dinp_bf16, dinp, kOneRounding, "dinp (overwritten)");
    expect_close(dweight_bf16, dweight, kReassociation, "dweight (+=)");

    // Without dinp only dweight is computed, still accumulating.
    llm::cpu::matmul_backward<float>(nullptr, dweight.data(), dout.data(), inp.data(),
                                     weight.data(), N, C, OC);
    llm::cpu::matmul_backward<Bf16>(nullptr, dweight_bf16.data(), dout_bf16.data(), inp_bf16.data(),
                                    weight_bf16.data(), N, C, OC);
    expect_close(dweight_bf16, dweight, kReassociation, "dweight (+=, dinp null)");
  }
}

// The matmuls go through OpenBLAS, which picks its kernels per CPU and splits
// the work per thread count, so their bits may change with the thread count
// (they do on AVX2-only AMD machines). What the project guarantees, and this
// checks at 1, 2 and 3 threads: a repeat gives the same bits, and the bf16
// entry point is exactly the fp32 one on the widened operands, rounded once
// (one chunk of rows here, so the same sgemm calls).
TEST(KernelBf16Matmul, BackwardRepeatsBitIdenticallyAtEachThreadCount) {
  std::mt19937 rng(114);
  const int N = 97, C = 70, OC = 45;
  const Floats inp = random_bf16_values((size_t)N * C, rng);
  const Floats weight = random_bf16_values((size_t)OC * C, rng);
  const Floats dout = random_bf16_values((size_t)N * OC, rng);
  const Bf16s inp_bf16 = to_bf16(inp), weight_bf16 = to_bf16(weight), dout_bf16 = to_bf16(dout);
  auto run_bf16 = [&] {
    Bf16s dinp(inp.size());
    Floats dweight((size_t)OC * C, 0.0f);
    llm::cpu::matmul_backward<Bf16>(dinp.data(), dweight.data(), dout_bf16.data(),
                                    inp_bf16.data(), weight_bf16.data(), N, C, OC);
    append(dweight, to_floats(dinp));
    return dweight;
  };
  auto run_widened_fp32 = [&] {
    Floats dinp(inp.size());
    Floats dweight((size_t)OC * C, 0.0f);
    llm::cpu::matmul_backward<float>(dinp.data(), dweight.data(), dout.data(), inp.data(),
                                     weight.data(), N, C, OC);
    append(dweight, to_floats(to_bf16(dinp)));
    return dweight;
  };
  for (int threads : {1, 2, 3}) {
    const std::string at = ", threads " + std::to_string(threads);
    const Floats first = with_threads(threads, run_bf16);
    expect_same_bits(with_threads(threads, run_bf16), first, "repeat" + at);
    expect_same_bits(first, with_threads(threads, run_widened_fp32), "bf16 vs widened fp32" + at);
  }
}

// ---- residual -----------------------------------------------------------------

TEST(KernelBf16Residual, RoundsFp32SumOnceAndMayAlias) {
  std::mt19937 rng(115);
  const size_t n = 1001;
  const Floats a = random_bf16_values(n, rng), b = random_bf16_values(n, rng);
  Floats sum(n);
  llm::cpu::add_vectors(sum.data(), a.data(), b.data(), n);
  const Bf16s b_bf16 = to_bf16(b);
  Bf16s out = nan_bf16(n), in_place = to_bf16(a);
  llm::cpu::add_vectors<Bf16>(out.data(), in_place.data(), b_bf16.data(), n);
  expect_rounded_once(out, sum, "out");
  llm::cpu::add_vectors<Bf16>(in_place.data(), in_place.data(), b_bf16.data(), n);
  expect_rounded_once(in_place, sum, "out aliasing a");
}

// ---- cross-entropy ------------------------------------------------------------

// Both precisions exponentiate the same widened logits into fp32 and sum them
// in the same order: losses are the same bits and each dlogit is to_bf16 of
// the fp32 one. Row 0's target logit leads by 8, so its probability is near 1
// and its gradient p - 1 is small: rounding p before subtracting the one-hot
// would be caught.
TEST(KernelBf16CrossEntropy, LossesMatchAndGradientsRoundFp32Once) {
  std::mt19937 rng(116);
  const int N = 7, V = 100;
  const float dloss = 0.37f;
  Floats logits = random_bf16_values((size_t)N * V, rng, -1.0f, 1.0f);
  const Ints targets = random_ints(N, V, rng);
  logits[targets[0]] = 9.0f;
  Floats losses(N), dlogits = logits;
  llm::cpu::cross_entropy_forward_backward(losses.data(), dlogits.data(), targets.data(), N, V,
                                           dloss);
  const Bf16s logits_bf16 = to_bf16(logits);
  Floats losses_forward(N, kNaN), losses_bf16(N, kNaN);
  llm::cpu::cross_entropy_forward<Bf16>(losses_forward.data(), logits_bf16.data(), targets.data(),
                                        N, V);
  Bf16s dlogits_bf16 = logits_bf16;
  llm::cpu::cross_entropy_forward_backward<Bf16>(losses_bf16.data(), dlogits_bf16.data(),
                                                 targets.data(), N, V, dloss);
  expect_same_bits(losses_forward, losses, "losses (forward)");
  expect_same_bits(losses_bf16, losses, "losses (forward_backward)");
  expect_rounded_once(dlogits_bf16, dlogits, "dlogits");
}

TEST(KernelBf16CrossEntropy, LargeLogitsStayFinite) {
  std::mt19937 rng(117);
  const int N = 4, V = 50;
  Floats logits = random_bf16_values((size_t)N * V, rng, -3.0f, 3.0f);
  for (int n = 0; n < N; n++) logits[(size_t)n * V + n] = 1000.0f;  // exp(1000) overflows
  logits[(size_t)(N - 1) * V] = -1000.0f;
  const Ints targets = {0, 0, 2, 7};  // row 0: the huge logit is the target; others not
  Floats losses(N);
  llm::cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V);
  Floats losses_bf16(N, kNaN);
  Bf16s dlogits = to_bf16(logits);
  llm::cpu::cross_entropy_forward_backward<Bf16>(losses_bf16.data(), dlogits.data(), targets.data(),
                                                 N, V, 1.0f);
  expect_same_bits(losses_bf16, losses, "losses");
  for (int n = 0; n < N; n++) {
    ASSERT_TRUE(std::isfinite(losses_bf16[n])) << "row " << n;
    double row_sum = 0.0;  // softmax sums to one, minus the one-hot: zero
    for (int v = 0; v < V; v++) {
      const float g = llm::to_float(dlogits[(size_t)n * V + v]);
      ASSERT_TRUE(std::isfinite(g)) << "row " << n << " column " << v;
      row_sum += g;
    }
    // Each gradient is rounded to bf16, by at most 2^-8 |g|, and sum |g| <= 2
    // (probabilities sum to 1, |p_target - 1| <= 1): within 2^-7 of zero.
    EXPECT_NEAR(row_sum, 0.0, std::ldexp(1.0, -7)) << "row " << n;
  }
}

}  // namespace
