// The CPU kernels give the same bits on every x86-64 CPU: each kernel runs on
// seeded inputs and the bits of all its outputs are hashed; the hashes are
// literals, recorded on an AVX-512 machine. This file is built into llm_tests
// (the build machine's -march) and into llm_cpu_kernel_tests_x86_64_v3 (AVX2
// + FMA with AMD's tuning, test/CMakeLists.txt), so `make test` holds the
// vector widths and the compiler's choices for each against one another on
// any machine (docs/testing.md#determinism-which-runs-give-the-same-bits).
// Invariant: a hash changes only when a kernel's arithmetic changes; a change
// on purpose records the new hash, which the failure prints.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ios>
#include <random>
#include <vector>

#include "model/kernels/adamw.h"
#include "model/kernels/attention.h"
#include "model/kernels/cpu_tile_gemm.h"
#include "model/kernels/cross_entropy.h"
#include "model/kernels/kv_cache.h"
#include "model/kernels/rmsnorm.h"
#include "model/kernels/swiglu.h"

#if defined(LLM_TEST_X86_64_V3) && (defined(__AVX512F__) || !defined(__FMA__))
#error "the x86-64-v3 build of these tests must have FMA and no AVX-512"
#endif

namespace llm::cpu {
namespace {

// n values in [-1, 1) from the raw bits of mt19937 (whose output the standard
// fixes, unlike its distributions').
std::vector<float> seeded(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(n);
  for (float& v : x) v = (float)(rng() >> 8) * 0x1p-23f - 1.0f;
  return x;
}

// FNV-1a over the bytes of every array, in order.
class BitHash {
 public:
  template <class T>
  BitHash& add(const std::vector<T>& values) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
    for (size_t i = 0; i < values.size() * sizeof(T); i++) hash_ = (hash_ ^ bytes[i]) * kPrime;
    return *this;
  }
  uint64_t value() const { return hash_; }

 private:
  static constexpr uint64_t kPrime = 0x100000001b3;
  uint64_t hash_ = 0xcbf29ce484222325;
};

void expect_hash(const BitHash& hash, uint64_t recorded) {
  EXPECT_EQ(hash.value(), recorded) << "new hash 0x" << std::hex << hash.value()
                                    << " (record it if the arithmetic changed on purpose)";
}

// Sizes leave remainders of every vector width (8 and 16 lanes, the tile
// kernel's 6 and 8 rows, the 16 partial sums of cpu_lane_sum.h) and cross
// attention's 64-query tiles.

TEST(CpuKernelBits, TileGemm) {
  const int m = 23, n = 45, k = 37;
  const std::vector<float> a = seeded((size_t)m * k, 1), b = seeded((size_t)k * n, 2);
  std::vector<float> c = seeded((size_t)m * n, 3), c_transposed = c;
  tile_gemm({c.data(), (size_t)n}, {a.data(), (size_t)k, 1}, {b.data(), (size_t)n}, m, n, k);
  tile_gemm({c_transposed.data(), (size_t)n}, {a.data(), 1, (size_t)m}, {b.data(), (size_t)n}, m, n,
            k);
  expect_hash(BitHash().add(c).add(c_transposed), 0x5b25e0054c0ed33f);
}

TEST(CpuKernelBits, Attention) {
  const int B = 2, T = 70, H = 4, KV = 2, D = 20;
  const size_t rows = (size_t)B * T;
  const std::vector<float> qkv = seeded(rows * (H + 2 * KV) * D, 4), dout = seeded(rows * H * D, 5);
  std::vector<float> out(rows * H * D), lse((size_t)B * H * T), dqkv(qkv.size());
  attention_forward(out.data(), lse.data(), qkv.data(), nullptr, B, T, H, KV, D);
  attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), nullptr, B, T, H,
                     KV, D);
  expect_hash(BitHash().add(out).add(lse).add(dqkv), 0x669480dc6a3375da);
}

TEST(CpuKernelBits, CachedAttention) {
  const int B = 1, T = 3, start = 37, H = 4, KV = 2, D = 20, capacity = 48;
  const size_t row = (size_t)(H + 2 * KV) * D;
  const std::vector<float> prefix = seeded((size_t)start * row, 6), qkv = seeded(T * row, 7);
  std::vector<float> cache((size_t)capacity * 2 * KV * D), out((size_t)T * H * D);
  kv_cache_write(cache.data(), prefix.data(), B, start, 0, H, KV, D, capacity);
  kv_cache_write(cache.data(), qkv.data(), B, T, start, H, KV, D, capacity);
  attention_cached(out.data(), qkv.data(), cache.data(), B, T, start, H, KV, D, capacity);
  expect_hash(BitHash().add(out), 0x2d08c74dcb18bf4b);
}

TEST(CpuKernelBits, RmsNorm) {
  const int N = 5, C = 100;
  const std::vector<float> x = seeded((size_t)N * C, 8), weight = seeded(C, 9),
                           dy = seeded((size_t)N * C, 10);
  std::vector<float> y(x.size()), rstd(N), dx = seeded(x.size(), 11), dweight = seeded(C, 12);
  rmsnorm_forward(y.data(), rstd.data(), x.data(), weight.data(), N, C, 1e-5f, nullptr);
  rmsnorm_backward(dx.data(), dweight.data(), dy.data(), x.data(), weight.data(), rstd.data(), N, C,
                   nullptr);
  expect_hash(BitHash().add(y).add(rstd).add(dx).add(dweight), 0x895501df1d078b51);
}

TEST(CpuKernelBits, CrossEntropy) {
  const int N = 4, V = 301;
  std::vector<float> logits = seeded((size_t)N * V, 13), partials(2 * N), losses(N);
  for (float& l : logits) l *= 8.0f;  // a spread of probabilities, not near-uniform
  const std::vector<int32_t> targets = {0, 17, 150, 300};
  cross_entropy_partials(partials.data(), logits.data(), targets.data(), N, V, 0);
  cross_entropy_combine(losses.data(), logits.data(), partials.data(), targets.data(), N, V, 0, 1,
                        1.0f / N);
  expect_hash(BitHash().add(partials).add(losses).add(logits), 0x8fc44263cb38669e);
}

TEST(CpuKernelBits, SwiGlu) {
  const int N = 3, F = 50;
  const std::vector<float> h13 = seeded((size_t)N * 2 * F, 14), dout = seeded((size_t)N * F, 15);
  std::vector<float> out((size_t)N * F), dh13(h13.size());
  swiglu_forward(out.data(), h13.data(), N, F, nullptr);
  swiglu_backward(dh13.data(), dout.data(), h13.data(), N, F, nullptr);
  expect_hash(BitHash().add(out).add(dh13), 0x52e61ce9b00f26ba);
}

TEST(CpuKernelBits, AdamWAndGradNorm) {
  const size_t n = 40000;  // more than one 16384-float chunk of sum_squares
  std::vector<float> params = seeded(n, 16), m = seeded(n, 17), v = seeded(n, 18);
  const std::vector<float> grads = seeded(n, 19);
  for (float& x : v) x = x * x;  // second moments are non-negative
  std::vector<double> norm(1);
  sum_squares(norm.data(), grads.data(), n);
  adamw_update(params.data(), nullptr, grads.data(), m.data(), v.data(), n, 3e-3f, 0.9f, 0.95f,
               1e-8f, 0.1f, 0.5f, 3);
  expect_hash(BitHash().add(norm).add(params).add(m).add(v), 0xa09532310f802eb0);
}

}  // namespace
}  // namespace llm::cpu
