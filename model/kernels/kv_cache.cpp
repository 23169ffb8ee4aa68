// The key/value cache and attention over it on the CPU. One (batch row,
// query head, query) per loop iteration, spread over OpenMP threads: its
// scores against every visible cached key, a max-subtracted softmax, and the
// probability-weighted sum of the cached values, all fp32, stored once.
// Invariant: each output element is written by exactly one iteration, whose
// sums run in increasing key order, so results do not depend on the thread count.
#include "model/kernels/kv_cache.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "model/kernels/cpu_exp.h"
#include "model/kernels/cpu_lane_sum.h"

namespace llm::cpu {

template <class Storage>
void kv_cache_write(Storage* cache, const Storage* qkv, int B, int T, int start, int H, int KV,
                    int D, int capacity) {
  const size_t row = (size_t)(H + 2 * KV) * D, cache_row = (size_t)2 * KV * D;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const Storage* src = qkv + ((size_t)b * T + t) * row + (size_t)H * D;
      Storage* dst = cache + ((size_t)b * capacity + start + t) * cache_row;
      for (size_t i = 0; i < cache_row; i++) dst[i] = src[i];
    }
  }
}

template <class Storage>
void attention_cached(Storage* out, const Storage* qkv, const Storage* cache, int B, int T,
                      int start, int H, int KV, int D, int capacity) {
  const size_t row = (size_t)(H + 2 * KV) * D, cache_row = (size_t)2 * KV * D;
  const size_t out_row = (size_t)H * D;
  const int group = H / KV;  // query heads per kv head
  const float scale = 1.0f / std::sqrt((float)D);
#pragma omp parallel
  {
    std::vector<float> query(D), acc(D), probs(start + T);
#pragma omp for collapse(3) schedule(static)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < H; h++) {
        for (int t = 0; t < T; t++) {
          const Storage* q = qkv + ((size_t)b * T + t) * row + (size_t)h * D;
          for (int d = 0; d < D; d++) query[d] = to_float(q[d]);
          const Storage* keys = cache + (size_t)b * capacity * cache_row + (size_t)(h / group) * D;
          const Storage* values = keys + (size_t)KV * D;
          const int visible = start + t + 1;
          float max = -INFINITY;
          for (int s = 0; s < visible; s++) {
            const Storage* k = keys + s * cache_row;
            const float dot = lane_sum<float>(D, [&](int d) { return query[d] * to_float(k[d]); });
            probs[s] = dot * scale;
            max = probs[s] > max ? probs[s] : max;
          }
#pragma omp simd
          for (int s = 0; s < visible; s++) probs[s] = exp_vectorizable(probs[s] - max);
          const float sum = lane_sum<float>(visible, [&](int s) { return probs[s]; });
          for (int d = 0; d < D; d++) acc[d] = 0.0f;
          for (int s = 0; s < visible; s++) {
            const Storage* v = values + s * cache_row;
            const float p = probs[s];
#pragma omp simd
            for (int d = 0; d < D; d++) acc[d] += p * to_float(v[d]);
          }
          Storage* o = out + ((size_t)b * T + t) * out_row + (size_t)h * D;
          const float inv_sum = 1.0f / sum;
          for (int d = 0; d < D; d++) store(o + d, acc[d] * inv_sum);
        }
      }
    }
  }
}

LLM_INSTANTIATE_FOR_STORAGE_TYPES(kv_cache_write);
LLM_INSTANTIATE_FOR_STORAGE_TYPES(attention_cached);

}  // namespace llm::cpu
