// Cross-entropy of the LM head, fused with its gradient so no separate
// softmax buffer exists: the logits buffer is overwritten by dlogits. Logits
// have storage type T (float or Bf16); losses are fp32 in both.
// Invariant: every target lies in [0, V); per-row losses are exact
// log-sum-exp minus the target logit (max-subtracted for stability).
#pragma once

#include <cstdint>

#include "runtime/storage_types.h"

namespace llm::cpu {

// losses (N) = logsumexp(logits[n]) - logits[n][targets[n]]; logits (N, V) untouched.
template <class T>
void cross_entropy_forward(float* losses, const T* logits, const int32_t* targets, int N, int V);

// As above, then logits[n] is overwritten with (softmax(logits[n]) - onehot(targets[n])) * dloss,
// the gradient of dloss * sum_n losses[n] (in bf16: computed in fp32, rounded once).
template <class T>
void cross_entropy_forward_backward(float* losses, T* logits, const int32_t* targets, int N, int V,
                                    float dloss);

}  // namespace llm::cpu

// CUDA twins (cross_entropy.cu): the same contracts on device pointers, queued on the compute stream.
namespace llm::cuda {

template <class T>
void cross_entropy_forward(float* losses, const T* logits, const int32_t* targets, int N, int V);
template <class T>
void cross_entropy_forward_backward(float* losses, T* logits, const int32_t* targets, int N, int V,
                                    float dloss);

}  // namespace llm::cuda
