// The floating-point operations the model computes, counted from its shapes:
// the one source for the benchmark's MFU, the trainer's TFLOP/s line and the
// throughput model's compute time. A matmul of an (n, k) by (k, m) product is
// 2 n k m; a pass's backward is twice its forward (the input and the weight
// gradients); causal attention computes T(T+1)/2 query-key pairs per head and
// sequence, two products of 2 D FLOPs each per pair.
// Invariant: step_flops is exactly the sum of unit_pass_flops over the units
// and both passes, scaled to the global batch, with no recomputation (the
// model FLOPs of the MFU convention); unit_pass_flops counts what a pass
// really runs, so a fully recomputed block's backward adds its forward again.
#pragma once

#include "schema/config.h"
#include "model/unit_provider.h"

namespace llm {

struct ModelFlops {
  double matmul = 0;     // the parameter matmuls (projections, FFN, LM head)
  double attention = 0;  // scores and weighted values
  double total() const { return matmul + attention; }
  ModelFlops& operator+=(const ModelFlops& o) {
    matmul += o.matmul;
    attention += o.attention;
    return *this;
  }
};

// One micro-batch (training.micro_batch_size sequences of training.seq_len)
// through unit `unit` of the whole model (0 the embedding, 1..n_layers the
// blocks, n_layers + 1 the final norm and LM head) in `pass`.
ModelFlops unit_pass_flops(const Config& config, int unit, Pass pass);

// One optimizer step of the global batch (training.batch_size sequences).
ModelFlops step_flops(const Config& config);

}  // namespace llm
