// Op cases of incremental decoding's attention (kv_cache_write and
// attention_cached, model/kernels/kv_cache.h) on every row (see op_harness.h).
// A sequence of S = start + T tokens is split: its first `start` rows are
// written to the cache by one call, its last T by another, and the last T
// queries attend over the cache. cpu f32: against the reference causal
// attention over the whole sequence (its last T rows); cpu bf16: the fp32
// twin rounded once (the same fp32 math on the same bf16-exact inputs);
// cuda: the CPU twins, within the attention forward's GPU bound. The cache write is a copy: exactly
// the k and v heads, at exactly the rows [start, start + T), nothing else touched. Invariant:
// outputs are pre-filled with NaN and cache rows never written hold NaN, so a query that reads past
// its visible positions, or an output left unwritten, fails.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "test/op_harness.h"

namespace llm::op_test {
namespace {

// B sequences, H query and KV key/value heads of D, cache `capacity` rows;
// the queries under test are rows [start, start + T).
struct DecodeShape {
  int B, start, T, H, KV, D, capacity;
};

// Prefill (start 0), one-token steps after a prefix (decode), a chunk after a
// prefix, multi-query and multi-head, odd D; capacity past the sequence so
// that the NaN rows beyond it would poison an over-reading kernel.
constexpr DecodeShape kCpuShapes[] = {{2, 0, 5, 4, 2, 6, 8},
                                      {2, 5, 1, 4, 2, 6, 8},
                                      {1, 3, 4, 3, 3, 4, 9},
                                      {3, 6, 2, 2, 1, 5, 10},
                                      {1, 70, 1, 4, 2, 64, 80}};
// cuda: more than one 128-key chunk (the online softmax's rescale), head dims
// past and under the block width.
constexpr DecodeShape kCudaShapes[] = {{1, 0, 1, 2, 1, 32, 4},
                                       {2, 5, 1, 4, 2, 64, 8},
                                       {2, 130, 3, 8, 2, 128, 140},
                                       {1, 300, 1, 4, 4, 64, 301},
                                       {2, 9, 4, 2, 2, 5, 16}};

std::string describe(const DecodeShape& s) {
  return "B=" + std::to_string(s.B) + " start=" + std::to_string(s.start) +
         " T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) + " KV=" + std::to_string(s.KV) +
         " D=" + std::to_string(s.D) + " capacity=" + std::to_string(s.capacity);
}

size_t row_of(const DecodeShape& s) { return (size_t)(s.H + 2 * s.KV) * s.D; }
size_t cache_row_of(const DecodeShape& s) { return (size_t)2 * s.KV * s.D; }

// Rows [first, first + count) of every sequence of qkv (B, S, row).
Floats rows_of(const Floats& qkv, const DecodeShape& s, int first, int count) {
  const size_t row = row_of(s), S = (size_t)s.start + s.T;
  Floats out;
  for (int b = 0; b < s.B; b++) {
    const auto from = qkv.begin() + (b * S + first) * row;
    out.insert(out.end(), from, from + (size_t)count * row);
  }
  return out;
}

// The op sequence under test on backend `be`: both writes, then the
// attention of the last T queries. Returns (cache, out).
template <class T>
std::pair<std::vector<T>, std::vector<T>> decode_on(const Backend& be, const Floats& qkv,
                                                    const DecodeShape& s, size_t offset) {
  const Floats prefix = rows_of(qkv, s, 0, s.start), tail = rows_of(qkv, s, s.start, s.T);
  Buffer<T> d_cache(be, nan_filled<T>((size_t)s.B * s.capacity * cache_row_of(s)), offset);
  Buffer<T> d_prefix(be, stored<T>(prefix.empty() ? Floats(1, 0.0f) : prefix), offset);
  Buffer<T> d_tail(be, stored<T>(tail), offset);
  Buffer<T> d_out(be, nan_filled<T>((size_t)s.B * s.T * s.H * s.D), offset);
  const TypedOps<T>& ops = be.ops<T>();
  if (s.start > 0)
    ops.kv_cache_write(d_cache.get(), d_prefix.get(), s.B, s.start, 0, s.H, s.KV, s.D, s.capacity);
  ops.kv_cache_write(d_cache.get(), d_tail.get(), s.B, s.T, s.start, s.H, s.KV, s.D, s.capacity);
  ops.attention_cached(d_out.get(), d_tail.get(), d_cache.get(), s.B, s.T, s.start, s.H, s.KV, s.D,
                       s.capacity);
  EXPECT_TRUE(d_cache.guards_intact() && d_out.guards_intact());
  return {d_cache.download(), d_out.download()};
}

// The cache holds each written row's k and v heads bit for bit, NaN elsewhere.
template <class T>
void expect_cache_rows(const std::vector<T>& cache, const std::vector<T>& qkv_t,
                       const DecodeShape& s) {
  const size_t row = row_of(s), cache_row = cache_row_of(s), S = (size_t)s.start + s.T;
  size_t misses = 0;
  for (int b = 0; b < s.B; b++) {
    for (int p = 0; p < s.capacity; p++) {
      for (size_t i = 0; i < cache_row; i++) {
        const T& got = cache[((size_t)b * s.capacity + p) * cache_row + i];
        if ((size_t)p < S) {
          const T& want = qkv_t[(b * S + p) * row + (size_t)s.H * s.D + i];
          misses += std::memcmp(&got, &want, sizeof(T)) != 0;
        } else {
          misses += !std::isnan(to_float(got));
        }
      }
    }
  }
  EXPECT_EQ(misses, 0u) << "cache elements not the k / v heads of their row (or written past S)";
}

template <class T>
void attention_cached_case(const OpRow& row) {
  constexpr bool bf16 = std::is_same_v<T, Bf16>;
  std::mt19937 rng(row.cuda() ? 501 : 21);
  for (const DecodeShape& s : shapes_for(row, kCpuShapes, kCudaShapes)) {
    for (size_t offset : offsets_for(row)) {
      SCOPED_TRACE(describe(s) + " offset=" + std::to_string(offset));
      const int S = s.start + s.T;
      const Floats qkv =
          random_values((size_t)s.B * S * row_of(s), rng, -2.0f, 2.0f, bf16 || row.cuda());
      const std::vector<T> qkv_t = stored<T>(qkv);
      const auto [cache, out] = decode_on<T>(row.backend(), qkv, s, offset);
      expect_cache_rows(cache, qkv_t, s);
      if (row.cuda()) {
        const auto fp32_twin = decode_on<float>(backend_cpu(), qkv, s, 0).second;
        const auto storage_twin = decode_on<T>(backend_cpu(), qkv, s, 0).second;
        // The GPU sums scores and values in another order (chunks of 128
        // keys, rescaled): the attention forward's bound, all math fp32 (no
        // factor is rounded to bf16 here). bf16 adds the one rounding of the
        // store: half an ulp (2^-8) against the fp32 twin, and where the two
        // fp32 results straddle a rounding boundary one ulp (2^-7) against
        // the bf16 twin.
        const Tolerance fp32_bound = kCudaAttentionTolerance;
        if constexpr (bf16) {
          expect_close(out, fp32_twin, Tolerance{fp32_bound.abs, fp32_bound.rel + 0x1p-8},
                       "bf16 out vs fp32 twin");
          expect_close(out, storage_twin, Tolerance{fp32_bound.abs, fp32_bound.rel + 0x1p-7},
                       "bf16 out vs bf16 twin");
        } else {
          expect_close(out, fp32_twin, fp32_bound, "out");
        }
      } else if (bf16) {
        expect_fp32_rounded(out, decode_on<float>(backend_cpu(), qkv, s, 0).second, "out");
      } else {
        const Vec full = reference::attention_forward(to_doubles(qkv), s.B, S, s.H, s.KV, s.D);
        Vec expected;
        const size_t out_row = (size_t)s.H * s.D;
        for (int b = 0; b < s.B; b++) {
          const auto from = full.begin() + ((size_t)b * S + s.start) * out_row;
          expected.insert(expected.end(), from, from + (size_t)s.T * out_row);
        }
        expect_close(out, expected, kForwardTolerance, "out");
      }
    }
  }
}

// The same inputs give the same bits at any thread count (cuda: run to run).
void attention_cached_deterministic(const OpRow& row) {
  std::mt19937 rng(22);
  const DecodeShape s{3, 7, 2, 4, 2, 8, 12};
  const Floats qkv =
      random_values((size_t)s.B * (s.start + s.T) * row_of(s), rng, -2.0f, 2.0f, false);
  expect_repeatable(
      row, [&] { return decode_on<float>(row.backend(), qkv, s, 0).second; }, "out");
}

}  // namespace

std::vector<OpCase> kv_cache_cases() {
  return {
      {"kv_cache",
       "write_then_attend",
       kAllRows,
       {"kv_cache_write", "attention_cached"},
       LLM_BY_DTYPE(attention_cached_case)},
      {"kv_cache",
       "deterministic",
       kF32Rows,
       {"kv_cache_write", "attention_cached"},
       attention_cached_deterministic},
  };
}

}  // namespace llm::op_test
