// Incremental decoding's attention: a per-layer key/value cache that grows by
// the rows of each forward, and causal grouped-query attention of the newest
// queries against everything cached so far.
// Cache layout (B, capacity, 2 * KV * D): row (b, p) holds position p's KV key
// heads then its KV value heads, exactly the tail of that token's fused qkv
// row (H query heads, KV key heads, KV value heads; RoPE already applied).
// Storage is float or Bf16; all math is fp32.
// Invariant: for queries at positions start .. start + T - 1 whose keys and
// values were written at those positions, attention_cached gives what
// attention_forward gives for the same rows of the whole sequence 0 ..
// start + T - 1 (same scale 1/sqrt(D), query head h reads kv head h / (H / KV)),
// up to fp32 summation order.
#pragma once

#include "base/storage_types.h"

namespace llm::cpu {

// cache rows (b, start .. start + T - 1) = the key and value heads of qkv
// (B, T, (H + 2*KV) * D); start + T <= capacity.
template <class Storage>
void kv_cache_write(Storage* cache, const Storage* qkv, int B, int T, int start, int H, int KV,
                    int D, int capacity);

// out (B, T, H * D): query (b, t) of qkv, at position start + t, attends to
// the cached positions 0 .. start + t of batch row b.
template <class Storage>
void attention_cached(Storage* out, const Storage* qkv, const Storage* cache, int B, int T,
                      int start, int H, int KV, int D, int capacity);

}  // namespace llm::cpu

// CUDA twins (kv_cache.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class Storage>
void kv_cache_write(Storage* cache, const Storage* qkv, int B, int T, int start, int H, int KV,
                    int D, int capacity);
template <class Storage>
void attention_cached(Storage* out, const Storage* qkv, const Storage* cache, int B, int T,
                      int start, int H, int KV, int D, int capacity);

}  // namespace llm::cuda
