// precision fp8 with the amax fused into the producers of the matmuls'
// inputs: RMSNorm (the qkv projection's and w13's input) and SwiGLU (w2's)
// write each output row's amax, and those matmuls take their scale from
// them instead of an amax pass; in the backward, each matmul casts its input
// with the scale its forward kept, and RMSNorm's backward (the residual
// stream's gradient: w2's and wo's output gradient) and SwiGLU's (w13's)
// write their rows' amaxes for the output gradient's scale. Counted: which
// amax passes remain; and the same bits as the unfused passes over optimizer
// steps of several micro-batches, without recomputation, with selective
// recomputation (the norm and SwiGLU again, writing no amaxes), with full
// (the forward again, writing them again), and with two micro-batches in
// flight, both forwards before both backwards, as a pipeline stage holds
// them (each slot's forward keeps its own input scales). Meshes:
// mpi_test_pipeline_parallel.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "model/transformer.h"
#include "parallel/sharding_engine.h"
#include "test/fp8_counting_backend.h"
#include "test/fp8_test_config.h"
#include "test/random_tokens.h"
#include "test/unit_values.h"

namespace llm {
namespace {

Config fp8_config() { return test_support::fp8_test_config(7); }

constexpr int kB = 2, kT = 6, kN = kB * kT;

// Per block and micro-batch, unfused: 4 forward inputs and, in the backward,
// each matrix's output gradient and input, 12 amax passes. Fused: of the
// forward's inputs only attention's output (wo's) is read for its amax; the
// norms' and SwiGLU's 3 come from their row amaxes. In the backward the
// inputs' 4 scales are the forward's, and of the output gradients only
// qkv's (RoPE's backward wrote it) is read for its amax; w2's and wo's (the
// norms' backward: the next block's or the final norm, and the MLP's) and
// w13's (SwiGLU's) come from row amaxes.
TEST(Fp8FusedAmax, NormAndSwigluOutputsNeedNoAmaxPass) {
  const Config c = fp8_config();
  const int L = c.model.n_layers;
  const Backend backend = test_support::fp8_counting_backend();
  test_support::Fp8ScaleCounts& counts = test_support::fp8_scale_counts;
  const std::vector<int32_t> inputs = random_tokens(kN, c.model.vocab_size, 1);
  const std::vector<int32_t> targets = random_tokens(kN, c.model.vocab_size, 2);
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "unfused");
    const std::unique_ptr<Transformer> model =
        Transformer::create(c.model, kB, kT, backend, {}, c.precision());
    model->set_fp8_fused_amax(fused);
    Topology topology(comm_world(), c.parallel);
    ShardingEngine engine(model->layout(), c, backend, topology);
    engine.zero_grads();
    model->stage_forward(engine, 0, inputs.data(), targets.data(), kB, kT, 1.0f / kN);
    model->stage_backward(engine, 0, kB, kT);  // the weights' casts: the first micro-batch
    counts = {};
    model->stage_forward(engine, 0, inputs.data(), targets.data(), kB, kT, 1.0f / kN);
    EXPECT_EQ(counts.amax_passes, (fused ? 1 : 4) * L) << "forward";
    EXPECT_EQ(counts.row_amax_scales, fused ? 3 * L : 0) << "forward";
    counts = {};
    model->stage_backward(engine, 0, kB, kT);
    EXPECT_EQ(counts.amax_passes, (fused ? 1 : 8) * L) << "backward";
    EXPECT_EQ(counts.row_amax_scales, fused ? 3 * L : 0) << "backward";
  }
}

// Three optimizer steps of two micro-batches: the losses, the last step's
// gradients and the parameters after it are the unfused run's bits. With two
// in flight, micro-batch m runs in slot m, both forwards first.
TEST(Fp8FusedAmax, TrainingGivesTheBitsOfTheUnfusedPasses) {
  const Config c = fp8_config();
  struct Case {
    Recompute recompute;
    int in_flight;
  };
  for (Case k : {Case{Recompute::none, 1}, Case{Recompute::selective, 1}, Case{Recompute::full, 1},
                 Case{Recompute::none, 2}}) {
    SCOPED_TRACE(testing::Message() << "recompute " << static_cast<int>(k.recompute) << ", "
                                    << k.in_flight << " in flight");
    auto run = [&](bool fused) {
      const std::unique_ptr<Transformer> model =
          Transformer::create(c.model, kB, kT, backend_cpu(), {k.recompute, 1}, c.precision(),
                              {.in_flight = k.in_flight});
      model->set_fp8_fused_amax(fused);
      Topology topology(comm_world(), c.parallel);
      ShardingEngine engine(model->layout(), c, backend_cpu(), topology);
      std::vector<float> bits;
      for (int step = 0; step < 3; ++step) {
        engine.zero_grads();
        for (int m = 0; m < 2; ++m) {
          const std::vector<int32_t> inputs =
              random_tokens(kN, c.model.vocab_size, 10 + 2 * (2 * step + m));
          const std::vector<int32_t> targets =
              random_tokens(kN, c.model.vocab_size, 11 + 2 * (2 * step + m));
          model->stage_forward(engine, m % k.in_flight, inputs.data(), targets.data(), kB, kT,
                               1.0f / (2 * kN));
          if (k.in_flight == 1) bits.push_back(model->stage_backward(engine, 0, kB, kT));
        }
        if (k.in_flight == 2) {
          for (int slot : {0, 1}) bits.push_back(model->stage_backward(engine, slot, kB, kT));
        }
        if (step == 2) {
          const std::vector<float> grads = test_support::unit_grads(engine, model->layout());
          bits.insert(bits.end(), grads.begin(), grads.end());
        }
        engine.optimizer_step({1e-2f, 1.0f, step + 1});
      }
      const std::vector<float> params = test_support::unit_params(engine, model->layout());
      bits.insert(bits.end(), params.begin(), params.end());
      return bits;
    };
    const std::vector<float> fused = run(true), unfused = run(false);
    ASSERT_EQ(fused.size(), unfused.size());
    EXPECT_EQ(0, std::memcmp(fused.data(), unfused.data(), fused.size() * sizeof(float)));
    EXPECT_GT(fused[0], 0.0f);  // a loss, not an empty run
  }
}

}  // namespace
}  // namespace llm
