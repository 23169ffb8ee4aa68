// Causal grouped-query attention on the CPU, flash-style: forward keeps only
// the log-sum-exp of each query's scores; backward recomputes probabilities.
// Work is tiled into blocks of kBlock queries x kBlock keys. A kv head's keys
// and values, and each tile's queries, are first copied into contiguous
// per-thread fp32 scratch (qkv rows are kilobytes apart, which thrashes cache
// sets), keys (and in backward values) also as per-tile transposes, and every
// product (Q K^T, P V, dO V^T, dS K, dS^T Q, P^T dO) is one register-blocked
// tile_gemm over that scratch. One template serves fp32 and bf16 storage: the
// copies into scratch widen, all math is fp32, and each output is rounded to
// its storage type once, when a finished fp32 row is stored.
// Document masking (doc_start not null): query t sees keys [doc_start[t], t],
// and the key tiles wholly before its tile's first query's document start are
// skipped (doc_start never decreases along a sequence); without it every
// product is the causal one's, bit for bit.
// Invariant: backward gives each (batch, kv head) to one thread, which sums
// the gradients of that head's keys and values over its query heads and
// positions in a fixed order, so results do not depend on the thread count.
#include "model/kernels/attention.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "model/kernels/cpu_exp.h"
#include "model/kernels/cpu_lane_sum.h"
#include "model/kernels/cpu_scratch.h"
#include "model/kernels/cpu_tile_gemm.h"

namespace llm::cpu {

namespace {

constexpr int kBlock = 64;  // queries and keys per tile; a tile of keys (64 x D) stays in L1

template <class Storage>
inline float dot(const float* a, const Storage* b, int D) {
  return lane_sum<float>(D, [&](int d) { return a[d] * to_float(b[d]); });
}

inline int round_up(int x, int multiple) { return (x + multiple - 1) / multiple * multiple; }

// dst (rows_pad, D) = `rows` rows of D values read `stride` apart, as fp32,
// then zeros.
template <class Storage>
void copy_rows(float* dst, const Storage* src, size_t stride, int rows, int rows_pad, int D) {
  for (int r = 0; r < rows; r++) {
#pragma omp simd
    for (int d = 0; d < D; d++) dst[(size_t)r * D + d] = to_float(src[r * stride + d]);
  }
  std::memset(dst + (size_t)rows * D, 0, sizeof(float) * (rows_pad - rows) * D);
}

// The inverse of copy_rows: `rows` contiguous fp32 rows of D values stored
// `stride` apart into dst, each rounded to dst's type.
template <class Storage>
void store_rows(Storage* dst, size_t stride, const float* src, int rows, int D) {
  for (int r = 0; r < rows; r++) {
#pragma omp simd
    for (int d = 0; d < D; d++) store(dst + r * stride + d, src[(size_t)r * D + d]);
  }
}

// dst[(kb * D + d) * kBlock + j] = src[(kb * kBlock + j) * D + d] for the
// T_pad contiguous rows of src: per key tile, the transpose (D, kBlock),
// contiguous, so the scores against a tile are a product whose right operand
// is one block of kBlock * D floats.
void transpose_tiles(float* dst, const float* src, int T_pad, int D) {
  for (int s0 = 0; s0 < T_pad; s0 += kBlock) {
    float* tile = dst + (size_t)s0 * D;
    const float* rows = src + (size_t)s0 * D;
    for (int j = 0; j < kBlock; j++)
      for (int d = 0; d < D; d++) tile[(size_t)d * kBlock + j] = rows[(size_t)j * D + d];
  }
}

// One (batch row, kv head)'s keys or values in per-thread scratch: rows
// (T_pad, D) contiguous and zero past T, and their per-tile transposes.
struct HeadRows {
  float* rows;
  float* tiled;
};

template <class Storage>
void load_head(HeadRows head, const Storage* src, size_t stride, int T, int T_pad, int D) {
  copy_rows(head.rows, src, stride, T, T_pad, D);
  transpose_tiles(head.tiled, head.rows, T_pad, D);
}

// Causal skipping inside the diagonal tile: its queries go in chunks of
// kChunk, and a chunk's products stop at the last key its last query sees.
// The keys skipped would only add zero terms (probability 0, score gradient
// 0), so the results are those of the whole tile.
constexpr int kChunk = 16;

// Keys [0, keys_seen(t0, i)) hold every key that query t0 + i (of the tile
// starting at t0) and the others of its chunk see: t0 plus its chunk's end.
inline int keys_seen(int t0, int i) {
  const int chunk_end = (i / kChunk + 1) * kChunk;
  return t0 + (chunk_end < kBlock ? chunk_end : kBlock);
}

// The first key the queries of the tile starting at t0 (of sequence row b0 =
// b * T) can see: their documents' earliest start, rounded down to a tile.
inline int first_key(const int32_t* doc_start, size_t b0, int t0) {
  return doc_start ? doc_start[b0 + t0] / kBlock * kBlock : 0;
}

// scores[i][s] (stride T_pad) = q_i . k_s for the n queries of tile [t0,
// t0 + n) and first <= s < keys_seen(t0, i) (first: a multiple of kBlock;
// zeros before it); queries (n, D) contiguous, keys as transpose_tiles lays
// them out.
void score_tile(float* scores, const float* queries, const float* keys_tiled, int t0, int n,
                int first, int T_pad, int D) {
  for (int i = 0; i < n; i++)
    std::memset(scores + (size_t)i * T_pad, 0, sizeof(float) * keys_seen(t0, i));
  for (int kb = first / kBlock; kb < t0 / kBlock;
       kb++) {  // the tiles left of the diagonal: all queries
    tile_gemm({scores + kb * kBlock, (size_t)T_pad}, {queries, (size_t)D, 1},
              {keys_tiled + (size_t)kb * D * kBlock, kBlock}, n, kBlock, D);
  }
  for (int i0 = 0; i0 < n; i0 += kChunk) {  // the diagonal tile, chunk by chunk
    const int rows = n - i0 < kChunk ? n - i0 : kChunk;
    tile_gemm({scores + (size_t)i0 * T_pad + t0, (size_t)T_pad},
              {queries + (size_t)i0 * D, (size_t)D, 1}, {keys_tiled + (size_t)t0 * D, kBlock}, rows,
              keys_seen(t0, i0) - t0, D);
  }
}

// C rows [0, n) += A rows (n, keys) B (keys, D), where row i needs only the
// keys [first, keys_seen(t0, i)): P V and dS K, chunk by chunk of rows.
void rows_times_keys(float* c, const float* a, size_t a_stride, const float* b, int t0, int n,
                     int first, int D) {
  for (int i0 = 0; i0 < n; i0 += kChunk) {
    const int rows = n - i0 < kChunk ? n - i0 : kChunk;
    tile_gemm({c + (size_t)i0 * D, (size_t)D}, {a + i0 * a_stride + first, a_stride, 1},
              {b + (size_t)first * D, (size_t)D}, rows, D, keys_seen(t0, i0) - first);
  }
}

// C rows [0, n_keys) (keys) += A^T B, the transpose of A (n queries, keys;
// stride T_pad) times B (n, D): dS^T Q and P^T dO. A key of the diagonal
// tile's chunk [t0 + i0, t0 + i0 + kChunk) is seen only from query t0 + i0
// on, so its sum starts there (the terms before are zeros). Keys before
// `first` are seen by none of these queries: their rows are left alone.
void keys_times_rows(float* c, const float* a, const float* b, int t0, int n, int n_keys, int first,
                     int T_pad, int D) {
  tile_gemm({c + (size_t)first * D, (size_t)D}, {a + first, 1, (size_t)T_pad}, {b, (size_t)D},
            t0 - first, D, n);
  for (int i0 = 0; i0 < n && t0 + i0 < n_keys; i0 += kChunk) {
    const int rows = n_keys - (t0 + i0) < kChunk ? n_keys - (t0 + i0) : kChunk;
    tile_gemm({c + (size_t)(t0 + i0) * D, (size_t)D},
              {a + (size_t)i0 * T_pad + t0 + i0, 1, (size_t)T_pad}, {b + (size_t)i0 * D, (size_t)D},
              rows, D, n - i0);
  }
}

// Tags of the two kernels' scratch buffers (cpu_scratch.h).
struct ForwardScratch;
enum ForwardSlot {
  kFwdKeys,
  kFwdKeysTiled,
  kFwdValues,
  kFwdQueries,
  kFwdOuts,
  kFwdProbs,
  kFwdSlots
};
struct BackwardScratch;
enum BackwardSlot {
  kBwdKeys,
  kBwdKeysTiled,
  kBwdValues,
  kBwdValuesTiled,
  kBwdKeyGrads,
  kBwdValueGrads,
  kBwdQueries,
  kBwdOutGrads,
  kBwdQueryGrads,
  kBwdProbs,
  kBwdScoreGrads,
  kBwdSlots
};

}  // namespace

template <class Storage>
void attention_forward(Storage* out, float* lse, const Storage* qkv, const int32_t* doc_start,
                       int B, int T, int H, int KV, int D) {
  const size_t row = (size_t)(H + 2 * KV) * D;  // values per token in qkv
  const size_t out_row = (size_t)H * D;
  const int group = H / KV;  // query heads per kv head
  const float scale = 1.0f / std::sqrt((float)D);
  const int T_pad = round_up(T, kBlock);
  const size_t head_floats = (size_t)T_pad * D, tile_floats = (size_t)kBlock * D;
#pragma omp parallel
  {
    // Per-thread scratch: the current kv head's keys (rows and tiled
    // transpose) and values; one query tile's queries, their scores then
    // probabilities, and their unnormalized outputs.
    auto buffer = [](ForwardSlot slot, size_t n) {
      return thread_scratch<ForwardScratch, kFwdSlots>(slot, n);
    };
    const HeadRows keys{buffer(kFwdKeys, head_floats), buffer(kFwdKeysTiled, head_floats)};
    float* values = buffer(kFwdValues, head_floats);
    float* queries = buffer(kFwdQueries, tile_floats);
    float* outs = buffer(kFwdOuts, tile_floats);
    float* probs = buffer(kFwdProbs, (size_t)kBlock * T_pad);
    float inv_sums[kBlock];  // 1 / sum of each query's unnormalized probabilities
    int loaded = -1;         // b * KV + kv head of the keys and values in scratch
                             // Query heads (b, h): a static schedule hands each thread consecutive
                             // heads, so the query heads of one kv head mostly load it once.
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < H; h++) {
        if (b * KV + h / group != loaded) {
          const Storage* k_src = qkv + (size_t)b * T * row + (size_t)(H + h / group) * D;
          load_head(keys, k_src, row, T, T_pad, D);
          copy_rows(values, k_src + (size_t)KV * D, row, T, T_pad, D);
          loaded = b * KV + h / group;
        }
        for (int t0 = 0; t0 < T; t0 += kBlock) {
          const int n = T - t0 < kBlock ? T - t0 : kBlock;
          const int first = first_key(doc_start, (size_t)b * T, t0);
          copy_rows(queries, qkv + (size_t)(b * T + t0) * row + (size_t)h * D, row, n, n, D);
          score_tile(probs, queries, keys.tiled, t0, n, first, T_pad, D);
          for (int i = 0; i < n; i++) {
            const int t = t0 + i;
            const int n_keys = keys_seen(t0, i);
            const int lo = doc_start ? doc_start[(size_t)b * T + t] : 0;  // its document's start
            float* p = probs + (size_t)i * T_pad;
            float max = p[lo];
#pragma omp simd reduction(max : max)
            for (int s = lo; s <= t; s++) max = p[s] > max ? p[s] : max;
#pragma omp simd
            for (int s = 0; s < n_keys; s++)
              p[s] = s >= lo && s <= t ? exp_vectorizable((p[s] - max) * scale) : 0.0f;
            const float sum = lane_sum<float>(n_keys, [&](int s) { return p[s]; });
            inv_sums[i] = 1.0f / sum;
            lse[((size_t)b * H + h) * T + t] = max * scale + std::log(sum);
          }
          std::memset(outs, 0, sizeof(float) * n * D);
          rows_times_keys(outs, probs, T_pad, values, t0, n, first, D);
          Storage* o0 = out + (size_t)(b * T + t0) * out_row + (size_t)h * D;
          for (int i = 0; i < n; i++) {
            const float* o = outs + (size_t)i * D;
#pragma omp simd
            for (int d = 0; d < D; d++) store(o0 + i * out_row + d, o[d] * inv_sums[i]);
          }
        }
      }
    }
  }
}

template <class Storage>
void attention_backward(Storage* dqkv, const Storage* dout, const Storage* qkv, const Storage* out,
                        const float* lse, const int32_t* doc_start, int B, int T, int H, int KV,
                        int D) {
  const size_t row = (size_t)(H + 2 * KV) * D;
  const size_t out_row = (size_t)H * D;
  const int group = H / KV;
  const float scale = 1.0f / std::sqrt((float)D);
  const int T_pad = round_up(T, kBlock);
  const size_t head_floats = (size_t)T_pad * D, tile_floats = (size_t)kBlock * D;
#pragma omp parallel
  {
    // Per-thread scratch. Whole kv head: keys and values (rows and tiled
    // transposes) and the key and value gradients being summed. One query
    // tile: its queries, output gradients and query gradients, probabilities
    // and score gradients (query-major; the key gradients read them
    // transposed through the strides of tile_gemm's left operand).
    auto buffer = [](BackwardSlot slot, size_t n) {
      return thread_scratch<BackwardScratch, kBwdSlots>(slot, n);
    };
    const HeadRows keys{buffer(kBwdKeys, head_floats), buffer(kBwdKeysTiled, head_floats)};
    const HeadRows values{buffer(kBwdValues, head_floats), buffer(kBwdValuesTiled, head_floats)};
    float* dkeys = buffer(kBwdKeyGrads, head_floats);
    float* dvalues = buffer(kBwdValueGrads, head_floats);
    float* queries = buffer(kBwdQueries, tile_floats);
    float* douts = buffer(kBwdOutGrads, tile_floats);
    float* dqueries = buffer(kBwdQueryGrads, tile_floats);
    float* probs = buffer(kBwdProbs, (size_t)kBlock * T_pad);
    float* dscores = buffer(kBwdScoreGrads, (size_t)kBlock * T_pad);
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
      for (int g = 0; g < KV; g++) {
        const Storage* k_src = qkv + (size_t)b * T * row + (size_t)(H + g) * D;
        load_head(keys, k_src, row, T, T_pad, D);
        load_head(values, k_src + (size_t)KV * D, row, T, T_pad, D);
        std::memset(dkeys, 0, sizeof(float) * head_floats);
        std::memset(dvalues, 0, sizeof(float) * head_floats);
        for (int h = g * group; h < (g + 1) * group; h++) {
          for (int t0 = 0; t0 < T; t0 += kBlock) {
            const int n = T - t0 < kBlock ? T - t0 : kBlock;
            const int n_keys = t0 + n;  // the keys these queries see
            const size_t token0 = (size_t)b * T + t0;
            const int first = first_key(doc_start, (size_t)b * T, t0);
            copy_rows(queries, qkv + token0 * row + (size_t)h * D, row, n, n, D);
            copy_rows(douts, dout + token0 * out_row + (size_t)h * D, out_row, n, n, D);
            score_tile(probs, queries, keys.tiled, t0, n, first, T_pad, D);
            score_tile(dscores, douts, values.tiled, t0, n, first, T_pad, D);
            for (int i = 0; i < n; i++) {
              const int t = t0 + i;
              const int lo = doc_start ? doc_start[token0 + i] : 0;
              const int seen = keys_seen(t0, i);
              float* p = probs + (size_t)i * T_pad;
              float* ds = dscores + (size_t)i * T_pad;  // holds dp = dout_t . v_s
              const float lse_t = lse[((size_t)b * H + h) * T + t];
              const float delta = dot(douts + i * D, out + (token0 + i) * out_row + (size_t)h * D,
                                      D);  // sum_s p_s dp_s
#pragma omp simd
              for (int s = 0; s < seen; s++) {
                const bool visible = s >= lo && s <= t;
                const float p_s = visible ? exp_vectorizable(p[s] * scale - lse_t) : 0.0f;
                p[s] = p_s;
                ds[s] = visible ? p_s * (ds[s] - delta) * scale : 0.0f;  // dL / d(q_t . k_s)
              }
            }
            // dq_t = sum_s dscore[t][s] k_s
            std::memset(dqueries, 0, sizeof(float) * n * D);
            rows_times_keys(dqueries, dscores, T_pad, keys.rows, t0, n, first, D);
            store_rows(dqkv + token0 * row + (size_t)h * D, row, dqueries, n, D);
            // dk_s += sum_t dscore[t][s] q_t; dv_s += sum_t p[t][s] dout_t
            keys_times_rows(dkeys, dscores, queries, t0, n, n_keys, first, T_pad, D);
            keys_times_rows(dvalues, probs, douts, t0, n, n_keys, first, T_pad, D);
          }
        }
        Storage* dk_dst = dqkv + (size_t)b * T * row + (size_t)(H + g) * D;
        store_rows(dk_dst, row, dkeys, T, D);
        store_rows(dk_dst + (size_t)KV * D, row, dvalues, T, D);
      }
    }
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(attention_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(attention_backward);

}  // namespace llm::cpu
