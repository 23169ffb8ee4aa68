// Causal grouped-query attention on the CPU, flash-style: forward keeps only
// the log-sum-exp of each query's scores; backward recomputes probabilities.
// Work is tiled into blocks of kBlock queries x kBlock keys; each head's keys
// and values, and each tile's queries, are first copied into contiguous
// per-thread fp32 scratch (qkv rows are kilobytes apart, which thrashes cache
// sets), and every product is an accumulate_rows call: a register-blocked sum
// of scaled contiguous rows. One template serves fp32 and bf16 storage: the
// copies into scratch widen, all math is fp32, and each output is rounded to
// its storage type once, when a finished fp32 row is stored.
// Invariant: backward gives each (batch, kv head) to one thread, which sums
// the gradients of that head's keys and values over its query heads and
// positions in a fixed order, so results do not depend on the thread count.
#include "model/kernels/attention.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "model/kernels/cpu_exp.h"

namespace llm::cpu {

namespace {

using Vec8 = float __attribute__((vector_size(32)));  // 8 floats: one AVX register
constexpr int kLanes = 8;
constexpr int kBlock = 64;  // queries and keys per tile; a tile of keys (64 x D) stays in L1

// out[0, 8 NV) += sum_i coeffs[i] * rows[i * stride + (0, 8 NV)], with the NV
// partial sums held in registers for the whole loop over i.
template <int NV>
inline void accumulate_block(float* out, const float* coeffs, const float* rows, int stride,
                             int n) {
  // memcpy is an unaligned vector load or store (and keeps vector types out of
  // function signatures, whose ABI depends on the target's vector extensions).
  Vec8 acc[NV];
  for (int v = 0; v < NV; v++) std::memcpy(&acc[v], out + v * kLanes, sizeof(Vec8));
  for (int i = 0; i < n; i++) {
    const float c = coeffs[i];
    const float* row = rows + (size_t)i * stride;
    for (int v = 0; v < NV; v++) {
      Vec8 x;
      std::memcpy(&x, row + v * kLanes, sizeof x);
      acc[v] += c * x;
    }
  }
  for (int v = 0; v < NV; v++) std::memcpy(out + v * kLanes, &acc[v], sizeof(Vec8));
}

// out[j] += sum_{i < n} coeffs[i] * rows[i * stride + j] for j < width: a
// vector-matrix product over contiguous rows, widest register blocks first.
void accumulate_rows(float* out, const float* coeffs, const float* rows, int stride, int n,
                     int width) {
  int j = 0;
  for (; j + 8 * kLanes <= width; j += 8 * kLanes)
    accumulate_block<8>(out + j, coeffs, rows + j, stride, n);
  if (j + 4 * kLanes <= width) {
    accumulate_block<4>(out + j, coeffs, rows + j, stride, n);
    j += 4 * kLanes;
  }
  if (j + 2 * kLanes <= width) {
    accumulate_block<2>(out + j, coeffs, rows + j, stride, n);
    j += 2 * kLanes;
  }
  if (j + kLanes <= width) {
    accumulate_block<1>(out + j, coeffs, rows + j, stride, n);
    j += kLanes;
  }
  for (; j < width; j++) {
    float sum = out[j];
    for (int i = 0; i < n; i++) sum += coeffs[i] * rows[(size_t)i * stride + j];
    out[j] = sum;
  }
}

template <class Storage>
inline float dot(const float* a, const Storage* b, int D) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int d = 0; d < D; d++) sum += a[d] * to_float(b[d]);
  return sum;
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

// dst[(kb * D + d) * kBlock + j] = row kb * kBlock + j, element d, of src (zero
// past T): per key tile, the transpose (D, kBlock), contiguous, so a query's
// scores against a tile are accumulate_rows over D rows of kBlock floats.
template <class Storage>
void transpose_tiles(float* dst, const Storage* src, size_t stride, int T, int T_pad, int D) {
  for (int s = 0; s < T_pad; s++) {
    float* tile = dst + (size_t)(s / kBlock) * D * kBlock + s % kBlock;
    for (int d = 0; d < D; d++)
      tile[(size_t)d * kBlock] = s < T ? to_float(src[s * stride + d]) : 0.0f;
  }
}

// scores[i][s] (stride T_pad) = q_i . k_s for the queries of tile [t0, t0 + n)
// and the key tiles up to the diagonal; queries (n, D) contiguous.
void score_tile(float* scores, const float* queries, const float* keys_tiled, int t0, int n,
                int T_pad, int D) {
  for (int kb = 0; kb <= t0 / kBlock; kb++) {
    const float* tile = keys_tiled + (size_t)kb * D * kBlock;
    for (int i = 0; i < n; i++) {
      float* out = scores + (size_t)i * T_pad + kb * kBlock;
      std::memset(out, 0, sizeof(float) * kBlock);
      accumulate_rows(out, queries + i * D, tile, kBlock, D, kBlock);
    }
  }
}

}  // namespace

template <class Storage>
void attention_forward(Storage* out, float* lse, const Storage* qkv, int B, int T, int H, int KV,
                       int D) {
  const size_t row = (size_t)(H + 2 * KV) * D;  // values per token in qkv
  const size_t out_row = (size_t)H * D;
  const int group = H / KV;  // query heads per kv head
  const float scale = 1.0f / std::sqrt((float)D);
  const int T_pad = round_up(T, kBlock);
#pragma omp parallel
  {
    // Per-thread scratch: this head's keys (tiled transpose) and values
    // (contiguous); one query tile's queries, their scores then
    // probabilities, and their unnormalized outputs.
    std::vector<float> keys_tiled((size_t)T_pad * D), values((size_t)T_pad * D);
    std::vector<float> queries((size_t)kBlock * D), outs((size_t)kBlock * D);
    std::vector<float> probs((size_t)kBlock * T_pad);
    float inv_sums[kBlock];  // 1 / sum of each query's unnormalized probabilities
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < H; h++) {
        const Storage* keys = qkv + (size_t)b * T * row + (size_t)(H + h / group) * D;
        transpose_tiles(keys_tiled.data(), keys, row, T, T_pad, D);
        copy_rows(values.data(), keys + (size_t)KV * D, row, T, T_pad, D);
        for (int t0 = 0; t0 < T; t0 += kBlock) {
          const int n = T - t0 < kBlock ? T - t0 : kBlock;
          copy_rows(queries.data(), qkv + (size_t)(b * T + t0) * row + (size_t)h * D, row, n, n, D);
          score_tile(probs.data(), queries.data(), keys_tiled.data(), t0, n, T_pad, D);
          const int n_keys = t0 + kBlock;  // keys of the tiles up to the diagonal
          for (int i = 0; i < n; i++) {
            const int t = t0 + i;
            float* p = probs.data() + (size_t)i * T_pad;
            float max = p[0];
#pragma omp simd reduction(max : max)
            for (int s = 0; s <= t; s++) max = p[s] > max ? p[s] : max;
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int s = 0; s < n_keys; s++) {
              p[s] = s <= t ? exp_vectorizable((p[s] - max) * scale) : 0.0f;
              sum += p[s];
            }
            std::memset(outs.data() + (size_t)i * D, 0, sizeof(float) * D);
            inv_sums[i] = 1.0f / sum;
            lse[((size_t)b * H + h) * T + t] = max * scale + std::log(sum);
          }
          for (int kb = 0; kb <= t0 / kBlock; kb++) {
            for (int i = 0; i < n; i++) {
              accumulate_rows(outs.data() + (size_t)i * D,
                              probs.data() + (size_t)i * T_pad + kb * kBlock,
                              values.data() + (size_t)kb * kBlock * D, D, kBlock, D);
            }
          }
          Storage* o0 = out + (size_t)(b * T + t0) * out_row + (size_t)h * D;
          for (int i = 0; i < n; i++) {
            const float* o = outs.data() + (size_t)i * D;
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
                        const float* lse, int B, int T, int H, int KV, int D) {
  const size_t row = (size_t)(H + 2 * KV) * D;
  const size_t out_row = (size_t)H * D;
  const int group = H / KV;
  const float scale = 1.0f / std::sqrt((float)D);
  const int T_pad = round_up(T, kBlock);
#pragma omp parallel
  {
    // Per-thread scratch. Whole kv head: keys and values as tiled transposes,
    // keys contiguous, and the key and value gradients being summed. One query
    // tile: its queries, output gradients and query gradients (contiguous),
    // probabilities and score gradients query-major, then key-major so that a
    // key's gradient sums over the tile with contiguous coefficients.
    const size_t head = (size_t)T_pad * D, tile = (size_t)kBlock * T_pad;
    std::vector<float> keys_tiled(head), values_tiled(head), keys(head), dkeys(head), dvalues(head);
    std::vector<float> queries((size_t)kBlock * D), douts((size_t)kBlock * D),
        dqueries((size_t)kBlock * D);
    std::vector<float> probs(tile), dscores(tile), probs_t(tile), dscores_t(tile);
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
      for (int g = 0; g < KV; g++) {
        const Storage* k_src = qkv + (size_t)b * T * row + (size_t)(H + g) * D;
        const Storage* v_src = k_src + (size_t)KV * D;
        transpose_tiles(keys_tiled.data(), k_src, row, T, T_pad, D);
        transpose_tiles(values_tiled.data(), v_src, row, T, T_pad, D);
        copy_rows(keys.data(), k_src, row, T, T_pad, D);
        std::memset(dkeys.data(), 0, sizeof(float) * head);
        std::memset(dvalues.data(), 0, sizeof(float) * head);
        for (int h = g * group; h < (g + 1) * group; h++) {
          for (int t0 = 0; t0 < T; t0 += kBlock) {
            const int n = T - t0 < kBlock ? T - t0 : kBlock;
            const int n_keys = t0 + kBlock;
            const size_t token0 = (size_t)b * T + t0;
            copy_rows(queries.data(), qkv + token0 * row + (size_t)h * D, row, n, kBlock, D);
            copy_rows(douts.data(), dout + token0 * out_row + (size_t)h * D, out_row, n, kBlock, D);
            score_tile(probs.data(), queries.data(), keys_tiled.data(), t0, n, T_pad, D);
            score_tile(dscores.data(), douts.data(), values_tiled.data(), t0, n, T_pad, D);
            for (int i = 0; i < kBlock; i++) {
              const int t = t0 + i;  // queries past T (i >= n) get zero rows
              float* p = probs.data() + (size_t)i * T_pad;
              float* ds = dscores.data() + (size_t)i * T_pad;  // holds dp = dout_t . v_s
              const float lse_t = i < n ? lse[((size_t)b * H + h) * T + t] : 0.0f;
              const float delta =
                  i < n ? dot(douts.data() + i * D, out + (token0 + i) * out_row + (size_t)h * D, D)
                        : 0.0f;  // sum_s p_s dp_s
#pragma omp simd
              for (int s = 0; s < n_keys; s++) {
                const bool visible = i < n && s <= t;
                const float p_s = visible ? exp_vectorizable(p[s] * scale - lse_t) : 0.0f;
                p[s] = p_s;
                ds[s] = visible ? p_s * (ds[s] - delta) * scale : 0.0f;  // dL / d(q_t . k_s)
              }
            }
            // dq_t = sum_s dscore[t][s] k_s
            std::memset(dqueries.data(), 0, sizeof(float) * kBlock * D);
            for (int kb = 0; kb <= t0 / kBlock; kb++) {
              for (int i = 0; i < n; i++) {
                accumulate_rows(dqueries.data() + i * D,
                                dscores.data() + (size_t)i * T_pad + kb * kBlock,
                                keys.data() + (size_t)kb * kBlock * D, D, kBlock, D);
              }
            }
            store_rows(dqkv + token0 * row + (size_t)h * D, row, dqueries.data(), n, D);
            // dk_s += sum_t dscore[t][s] q_t; dv_s += sum_t p[t][s] dout_t
            for (int i = 0; i < kBlock; i++) {
              for (int s = 0; s < n_keys; s++) {
                probs_t[(size_t)s * kBlock + i] = probs[(size_t)i * T_pad + s];
                dscores_t[(size_t)s * kBlock + i] = dscores[(size_t)i * T_pad + s];
              }
            }
            for (int s = 0; s < n_keys && s < T; s++) {
              accumulate_rows(dkeys.data() + s * D, dscores_t.data() + (size_t)s * kBlock,
                              queries.data(), D, kBlock, D);
              accumulate_rows(dvalues.data() + s * D, probs_t.data() + (size_t)s * kBlock,
                              douts.data(), D, kBlock, D);
            }
          }
        }
        Storage* dk_dst = dqkv + (size_t)b * T * row + (size_t)(H + g) * D;
        store_rows(dk_dst, row, dkeys.data(), T, D);
        store_rows(dk_dst + (size_t)KV * D, row, dvalues.data(), T, D);
      }
    }
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(attention_forward);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(attention_backward);

}  // namespace llm::cpu
