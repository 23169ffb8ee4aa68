// model/flops.h against counts made another way: the step's matmul FLOPs
// from the parameter layout's own matrices (6 x parameters x tokens), the
// attention FLOPs from the closed form, and the recomputed forward of a fully
// recomputed block from what it leaves out (the down projection).
#include <gtest/gtest.h>

#include "model/flops.h"
#include "model/layout.h"

namespace llm {
namespace {

Config model_config(bool tied) {
  Config c;
  c.path = "test";
  c.model.dim = 48;
  c.model.n_layers = 3;
  c.model.n_heads = 6;
  c.model.n_kv_heads = 2;
  c.model.ffn_dim = 80;
  c.model.vocab_size = 101;
  c.model.tie_embeddings = tied;
  c.training.batch_size = 6;
  c.training.micro_batch_size = 2;
  c.training.seq_len = 17;
  c.data.train = "unused";
  return c;
}

// Exact for these sizes: every count is an integer far below 2^53.
TEST(ModelFlops, StepIsSixTimesTheLayoutsMatmulParametersPerTokenPlusAttention) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const Config c = model_config(tied);
    const ParameterLayout layout = layout_build(c.model);
    // Every matrix multiplies activations but an untied embedding table,
    // which is only looked up (tied, it is also the LM head).
    double matmul_params = 0;
    for (const TensorSpec& t : layout.tensors) {
      const bool lookup_only = t.unit == layout.embed_unit() && !tied;
      if (t.shape.size() == 2 && !lookup_only) matmul_params += static_cast<double>(t.numel);
    }
    const double sequences = c.training.batch_size, T = c.training.seq_len;
    const double D = static_cast<double>(c.model.dim) / c.model.n_heads;
    const ModelFlops f = step_flops(c);
    EXPECT_EQ(f.matmul, 6.0 * matmul_params * sequences * T);
    // Forward: scores and weighted values, 2 D each per causal pair; backward twice that.
    EXPECT_EQ(f.attention, 3.0 * 2.0 * 2.0 * D * (T * (T + 1) / 2) * c.model.n_heads *
                               c.model.n_layers * sequences);
  }
}

TEST(ModelFlops, FullRecomputationAddsTheForwardUpToSwiGLU) {
  Config c = model_config(false);
  Config full = c;
  full.training.recompute = Recompute::full;
  const double N = static_cast<double>(c.training.micro_batch_size) * c.training.seq_len;
  const double down_projection = 2.0 * N * c.model.ffn_dim * c.model.dim;
  for (int unit = 1; unit <= c.model.n_layers; ++unit) {
    const ModelFlops forward = unit_pass_flops(c, unit, Pass::forward);
    const double extra = unit_pass_flops(full, unit, Pass::backward).total() -
                         unit_pass_flops(c, unit, Pass::backward).total();
    EXPECT_EQ(extra, forward.total() - down_projection) << "block " << unit;
    EXPECT_EQ(unit_pass_flops(full, unit, Pass::forward).total(), forward.total());
  }
  // The embedding computes no FLOPs; the head's recomputes nothing.
  EXPECT_EQ(unit_pass_flops(full, 0, Pass::backward).total(), 0.0);
  EXPECT_EQ(unit_pass_flops(full, c.model.n_layers + 1, Pass::backward).total(),
            unit_pass_flops(c, c.model.n_layers + 1, Pass::backward).total());
  // The step's model FLOPs ignore recomputation.
  EXPECT_EQ(step_flops(full).total(), step_flops(c).total());
}

}  // namespace
}  // namespace llm
