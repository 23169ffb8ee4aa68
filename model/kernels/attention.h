// Causal grouped-query self-attention over the fused qkv buffer, flash-style:
// the (T, T) score matrix is never stored; forward keeps only the
// log-sum-exp of each query's scores, and backward recomputes probabilities.
// qkv, out and their gradients have storage type Storage (float or Bf16);
// lse is fp32 and all math is fp32 in both.
// Invariant: deterministic (each kv head's gradient is summed by one thread in
// a fixed order), scale 1/sqrt(D), query head h reads kv head h / (H / KV).
#pragma once

#include <cstdint>

#include "base/storage_types.h"

namespace llm::cpu {

// qkv (B, T, (H + 2*KV) * D): per token, H query heads, then KV key heads,
// then KV value heads (RoPE already applied to q and k).
// out (B, T, H * D); lse (B, H, T) = log sum_s<=t exp(q_t . k_s / sqrt(D)).
// doc_start (B, T) or null: with it, query t of sequence b sees only the keys
// s with doc_start[b][t] <= s <= t (the documents packed into a sequence
// never attend to each other; doc_start[b][t] <= t, never decreasing in t),
// and the sums above run over those; null is plain causal attention.
// (The storage type is not named T: T is the sequence length.)
template <class Storage>
void attention_forward(Storage* out, float* lse, const Storage* qkv, const int32_t* doc_start,
                       int B, int T, int H, int KV, int D);

// dqkv (B, T, (H + 2*KV) * D) is overwritten with the gradient of q, k and v;
// dout (B, T, H * D); out and lse are what forward produced.
template <class Storage>
void attention_backward(Storage* dqkv, const Storage* dout, const Storage* qkv, const Storage* out,
                        const float* lse, const int32_t* doc_start, int B, int T, int H, int KV,
                        int D);

}  // namespace llm::cpu

// CUDA twins (attention.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class Storage>
void attention_forward(Storage* out, float* lse, const Storage* qkv, const int32_t* doc_start,
                       int B, int T, int H, int KV, int D);
template <class Storage>
void attention_backward(Storage* dqkv, const Storage* dout, const Storage* qkv, const Storage* out,
                        const float* lse, const int32_t* doc_start, int B, int T, int H, int KV,
                        int D);

}  // namespace llm::cuda
