// What each tensor-parallel collective of the transformer carries, tagged
// where it is issued (Group::set_tag), so that the planner's recording
// (planning/tensor_parallel_model.cpp) sizes it for the real model by what
// it is rather than recognizing it by its element count.
#pragma once

namespace llm {

enum class TensorPayload {
  untagged = 0,
  activation_rows,  // this rank's n = N / T rows of the residual width C
  norm_gain_grads,  // norm-gain gradients, multiples of C (summed over the group)
  head_norm_grads,  // QK-norm's gain gradients, 2 D (summed over the group)
  loss_parts,       // every token's (log-sum-exp, target logit): 2N
  logits_row,       // one row of logits over the vocabulary (sampling, not training)
};

}  // namespace llm
