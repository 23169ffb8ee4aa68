// precision fp8 with the amax fused into the producers of the matmuls'
// inputs: RMSNorm (the qkv projection's and w13's input) and SwiGLU (w2's)
// write each output row's amax, and those matmuls take their scale from
// them instead of an amax pass. Counted: which amax passes remain; and the
// same bits as the unfused passes over optimizer steps of several
// micro-batches, without recomputation, with selective recomputation (the
// norm and SwiGLU again, writing no amaxes) and with full (the forward again,
// writing them again).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "model/transformer.h"
#include "parallel/sharding_engine.h"
#include "test/fp8_test_config.h"
#include "test/random_tokens.h"

namespace llm {
namespace {

Config fp8_config() { return test_support::fp8_test_config(7); }

constexpr int kB = 2, kT = 6, kN = kB * kT;

// The CPU backend, counting amax passes and scales made from row amaxes.
int amax_passes = 0, row_amax_scales = 0;
void counting_amax_scale(Fp8Scale* scale, const Bf16* x, size_t n, Fp8Format format) {
  ++amax_passes;
  cpu::fp8_amax_scale(scale, x, n, format);
}
void counting_row_amax_scale(Fp8Scale* scale, const float* row_amax, int rows, Fp8Format format) {
  ++row_amax_scales;
  cpu::fp8_scale_from_row_amax(scale, row_amax, rows, format);
}
Backend counting_backend() {
  Backend backend = backend_cpu();
  backend.fp8_amax_scale = counting_amax_scale;
  backend.fp8_scale_from_row_amax = counting_row_amax_scale;
  return backend;
}

// Per block and micro-batch, unfused: 4 forward inputs and, in the backward,
// each matrix's output gradient and input, 12 amax passes. Fused: of the
// forward's inputs only attention's output (wo's) is read for its amax; the
// norms' and SwiGLU's 3 come from their row amaxes. The backward is as before.
TEST(Fp8FusedAmax, NormAndSwigluOutputsNeedNoAmaxPass) {
  const Config c = fp8_config();
  const int L = c.model.n_layers;
  const Backend backend = counting_backend();
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
    amax_passes = row_amax_scales = 0;
    model->stage_forward(engine, 0, inputs.data(), targets.data(), kB, kT, 1.0f / kN);
    EXPECT_EQ(amax_passes, (fused ? 1 : 4) * L) << "forward";
    EXPECT_EQ(row_amax_scales, fused ? 3 * L : 0) << "forward";
    amax_passes = row_amax_scales = 0;
    model->stage_backward(engine, 0, kB, kT);
    EXPECT_EQ(amax_passes, 8 * L) << "backward";
    EXPECT_EQ(row_amax_scales, 0) << "backward";
  }
}

// Three optimizer steps of two micro-batches: the losses, the last step's
// gradients and the parameters after it are the unfused run's bits.
TEST(Fp8FusedAmax, TrainingGivesTheBitsOfTheUnfusedPasses) {
  const Config c = fp8_config();
  for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
    SCOPED_TRACE(testing::Message() << "recompute " << static_cast<int>(recompute));
    auto run = [&](bool fused) {
      const std::unique_ptr<Transformer> model =
          Transformer::create(c.model, kB, kT, backend_cpu(), {recompute, 1}, c.precision());
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
          model->stage_forward(engine, 0, inputs.data(), targets.data(), kB, kT, 1.0f / (2 * kN));
          bits.push_back(model->stage_backward(engine, 0, kB, kT));
        }
        if (step == 2) {
          for (size_t u = 0; u < model->layout().units.size(); ++u) {
            std::vector<float> g(model->layout().units[u].numel);
            engine.gather_grads(static_cast<int>(u), g.data());
            bits.insert(bits.end(), g.begin(), g.end());
          }
        }
        engine.optimizer_step({1e-2f, 1.0f, step + 1});
      }
      for (size_t u = 0; u < model->layout().units.size(); ++u) {
        std::vector<float> p(model->layout().units[u].numel);
        engine.gather_params(static_cast<int>(u), p.data());
        bits.insert(bits.end(), p.begin(), p.end());
      }
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
