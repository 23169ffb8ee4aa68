// What each tensor-parallel collective of the transformer carries, tagged
// where it is issued (Group::set_tag), so that the planner's recording
// (cost_models/tensor_parallel_model.cpp) sizes it for the real model by what
// it is rather than recognizing it by its element count.
#pragma once

namespace llm {

enum class TensorPayload {
  untagged = 0,
  activation_rows,   // this rank's n = N / T rows of the residual width C
  block_gain_grads,  // a block's replicated gains' gradients (block.h), summed over the group
  final_norm_grads,  // the final norm's gain gradient, C, summed over the group
  loss_parts,        // every token's (log-sum-exp, target logit): 2N
  logits_row,        // one row of logits over the vocabulary (sampling, not training)
};

}  // namespace llm
