// Cross-entropy of the LM head over a vocabulary split across ranks, so that no
// rank ever holds full logits: each rank holds the logits (N, V_local) of its
// slice [vocab_begin, vocab_begin + V_local) of the vocabulary and
//   1. cross_entropy_partials: per row, the slice's logsumexp and the target's
//      logit when the target lies in the slice (else 0): (N, 2) fp32;
//   2. (the caller all-gathers the partials of every rank, in rank order);
//   3. cross_entropy_combine: the full losses from all partials and, fused,
//      the gradient of the slice in place of its logits (no softmax buffer).
// One rank (ranks = 1, vocab_begin = 0, V_local = V) is the full cross-entropy.
// Logits have storage type T (float or Bf16); partials and losses are fp32.
// Invariants: every target lies in [0, V_total) (the whole vocabulary), so
// exactly one rank's slice holds it, or is kIgnoredTarget (data/targets.h,
// negative): that row's loss is 0 and its gradient 0 on every rank; every logsumexp is
// max-subtracted (the slice's max, then the max of the slices'), so logits of any magnitude give
// finite losses; the partials are fp32, so the global logsumexp and the
// probabilities exp(logit - lse) carry a relative error of about half an fp32
// ulp of |lse|; each dlogit is formed in fp32 and rounded once to T.
#pragma once

#include <cstdint>

#include "base/storage_types.h"

namespace llm::cpu {

// For each row n of logits (N, V_local): partials[2n] = logsumexp(logits[n])
// (-inf when V_local is 0), partials[2n + 1] = logits[n][targets[n] -
// vocab_begin] when that index lies in [0, V_local), else 0. Logits untouched.
template <class T>
void cross_entropy_partials(float* partials, const T* logits, const int32_t* targets, int N,
                            int V_local, int vocab_begin);

// partials: `ranks` blocks of (N, 2), every rank's partials in rank order (an
// all-gather's output). lse[n] = logsumexp over r of partials[r][n][0];
// losses (N) [n] = lse[n] - sum over r of partials[r][n][1]. When logits
// (N, V_local, this rank's slice) is not null it is overwritten with the
// gradient of dloss * sum_n losses[n] with respect to it:
// (exp(logits[n][j] - lse[n]) - [vocab_begin + j == targets[n]]) * dloss.
// A row whose target is negative (ignored) gets losses[n] = 0 and a zero
// gradient row.
template <class T>
void cross_entropy_combine(float* losses, T* logits, const float* partials, const int32_t* targets,
                           int N, int V_local, int vocab_begin, int ranks, float dloss);

}  // namespace llm::cpu

// CUDA twins (cross_entropy.cu): the same contracts on device pointers, queued on the compute
// stream.
namespace llm::cuda {

template <class T>
void cross_entropy_partials(float* partials, const T* logits, const int32_t* targets, int N,
                            int V_local, int vocab_begin);
template <class T>
void cross_entropy_combine(float* losses, T* logits, const float* partials, const int32_t* targets,
                           int N, int V_local, int vocab_begin, int ranks, float dloss);

}  // namespace llm::cuda
