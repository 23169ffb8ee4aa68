// Cross-entropy of the LM head, fused with its gradient so no separate
// softmax buffer exists: the logits buffer is overwritten by dlogits.
// Invariant: every target lies in [0, V); per-row losses are exact
// log-sum-exp minus the target logit (max-subtracted for stability).
#pragma once

#include <cstdint>

namespace llm::cpu {

// losses (N) = logsumexp(logits[n]) - logits[n][targets[n]]; logits (N, V) untouched.
void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int N,
                           int V);

// As above, then logits[n] is overwritten with (softmax(logits[n]) - onehot(targets[n])) * dloss,
// the gradient of dloss * sum_n losses[n].
void cross_entropy_forward_backward(float* losses, float* logits, const int32_t* targets, int N,
                                    int V, float dloss);

}  // namespace llm::cpu
