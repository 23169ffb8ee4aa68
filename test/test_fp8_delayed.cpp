// FP8 delayed scaling (training.fp8_scaling = delayed; model/linear_layers.h,
// trainer/fp8_amax_history.h): with a history, a forward casts nothing of
// its norms' and SwiGLU's outputs (they write the codes) and runs no amax
// pass; the fused casts give the bits of the unfused ones, with and without
// recomputation; the first step is current scaling's bits; the loss follows
// current scaling's; a resumed run gives the uninterrupted run's bits, its
// history saved in the checkpoint; the key needs precision fp8.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/file_io.h"
#include "model/transformer.h"
#include "parallel/comm.h"
#include "parallel/sharding_engine.h"
#include "test/error_of.h"
#include "test/fp8_test_config.h"
#include "test/random_tokens.h"
#include "test/tiny_trainer.h"
#include "test/unit_values.h"
#include "trainer/fp8_amax_history.h"

namespace llm {
namespace {

constexpr int kB = 2, kT = 6, kN = kB * kT;

// The CPU backend, counting the FP8 forward input's amax passes and casts
// and the producers' fused casts.
int amax_passes = 0, casts = 0, cast_amaxes = 0, fused_casts = 0;
void counting_amax_scale(Fp8Scale* scale, const Bf16* x, size_t n, Fp8Format format) {
  ++amax_passes;
  cpu::fp8_amax_scale(scale, x, n, format);
}
void counting_cast(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                   const Fp8Scale* scale, Fp8Format format) {
  ++casts;
  cpu::fp8_cast_transpose(codes, codes_t, x, rows, cols, scale, format);
}
void counting_cast_amax(uint8_t* codes, float* amax, const Bf16* x, size_t n, const Fp8Scale* scale,
                        Fp8Format format) {
  ++cast_amaxes;
  cpu::fp8_cast_amax(codes, amax, x, n, scale, format);
}
void counting_rmsnorm(Bf16* out, float* rstd, const Bf16* inp, const Bf16* weight, int N, int C,
                      float eps, float* row_amax, uint8_t* codes, const Fp8Scale* scale) {
  fused_casts += codes != nullptr;
  cpu::rmsnorm_forward_fp8(out, rstd, inp, weight, N, C, eps, row_amax, codes, scale);
}
void counting_swiglu(Bf16* out, const Bf16* h13, int N, int F, float* row_amax, uint8_t* codes,
                     const Fp8Scale* scale) {
  fused_casts += codes != nullptr;
  cpu::swiglu_forward_fp8(out, h13, N, F, row_amax, codes, scale);
}
Backend counting_backend() {
  Backend backend = backend_cpu();
  backend.fp8_amax_scale = counting_amax_scale;
  backend.fp8_cast_transpose = counting_cast;
  backend.fp8_cast_amax = counting_cast_amax;
  backend.bf16.rmsnorm_forward_fp8 = counting_rmsnorm;
  backend.bf16.swiglu_forward_fp8 = counting_swiglu;
  return backend;
}

// Per block, with a history: the two norms and SwiGLU write their matmuls'
// codes, attention's output is cast with its amax in one pass (1 per
// block); no forward input is amax-passed or cast otherwise. The first step
// (no history) is current scaling's: 4 amax passes and casts per block.
TEST(Fp8Delayed, WithAHistoryTheProducersCastAndNoAmaxPassRuns) {
  const Config c = test_support::fp8_test_config(7);
  const int L = c.model.n_layers;
  const Backend backend = counting_backend();
  const std::vector<int32_t> inputs = random_tokens(kN, c.model.vocab_size, 1);
  const std::vector<int32_t> targets = random_tokens(kN, c.model.vocab_size, 2);
  const std::unique_ptr<Transformer> model =
      Transformer::create(c.model, kB, kT, backend, {}, c.precision());
  Topology topology(comm_world(), c.parallel);
  ShardingEngine engine(model->layout(), c, backend, topology);
  engine.zero_grads();
  model->begin_fp8_delayed_step({});
  model->stage_forward(engine, 0, inputs.data(), targets.data(), kB, kT, 1.0f / kN);
  model->stage_backward(engine, 0, kB, kT);  // the weights' casts: the first micro-batch
  amax_passes = casts = cast_amaxes = fused_casts = 0;
  model->stage_forward(engine, 0, inputs.data(), targets.data(), kB, kT, 1.0f / kN);
  EXPECT_EQ(amax_passes, L) << "the first step: attention's output's amax passes";
  EXPECT_EQ(casts, 4 * L);
  EXPECT_EQ(cast_amaxes + fused_casts, 0);
  const std::vector<float> amax = model->fp8_step_amax();
  ASSERT_EQ(amax.size(), static_cast<size_t>(4 * L));
  for (float a : amax) EXPECT_GT(a, 0.0f) << "every input's amax recorded";

  model->stage_backward(engine, 0, kB, kT);
  model->begin_fp8_delayed_step(amax);
  EXPECT_EQ(model->fp8_step_amax(), std::vector<float>(amax.size(), 0.0f)) << "restarted";
  amax_passes = casts = cast_amaxes = fused_casts = 0;
  model->stage_forward(engine, 0, inputs.data(), targets.data(), kB, kT, 1.0f / kN);
  EXPECT_EQ(amax_passes + casts, 0);
  EXPECT_EQ(cast_amaxes, L);
  EXPECT_EQ(fused_casts, 3 * L);
  // The same tokens and weights: the same amaxes, recorded from the
  // producers' row amaxes and the cast alike.
  EXPECT_EQ(model->fp8_step_amax(), amax);
}

// Three optimizer steps of two micro-batches with the history kept as the
// trainer keeps it: the losses, the last step's gradients and the parameters
// after it, for the fused casts and the unfused (each input cast by
// fp8_cast_amax), with no, selective and full recomputation.
std::vector<float> delayed_run_bits(bool fused, Recompute recompute) {
  const Config c = test_support::fp8_test_config(7);
  const std::unique_ptr<Transformer> model =
      Transformer::create(c.model, kB, kT, backend_cpu(), {recompute, 1}, c.precision());
  model->set_fp8_fused_amax(fused);
  Topology topology(comm_world(), c.parallel);
  ShardingEngine engine(model->layout(), c, backend_cpu(), topology);
  Fp8AmaxHistory history(2, static_cast<size_t>(model->fp8_delayed_inputs()));
  std::vector<float> bits;
  for (int step = 0; step < 3; ++step) {
    model->begin_fp8_delayed_step(history.max());
    engine.zero_grads();
    for (int m = 0; m < 2; ++m) {
      const std::vector<int32_t> inputs =
          random_tokens(kN, c.model.vocab_size, 10 + 2 * (2 * step + m));
      const std::vector<int32_t> targets =
          random_tokens(kN, c.model.vocab_size, 11 + 2 * (2 * step + m));
      model->stage_forward(engine, 0, inputs.data(), targets.data(), kB, kT, 1.0f / (2 * kN));
      bits.push_back(model->stage_backward(engine, 0, kB, kT));
    }
    history.push(model->fp8_step_amax());
    if (step == 2) {
      const std::vector<float> grads = test_support::unit_grads(engine, model->layout());
      bits.insert(bits.end(), grads.begin(), grads.end());
    }
    engine.optimizer_step({1e-2f, 1.0f, step + 1});
  }
  const std::vector<float> params = test_support::unit_params(engine, model->layout());
  bits.insert(bits.end(), params.begin(), params.end());
  return bits;
}

TEST(Fp8Delayed, FusedCastsAndRecomputationGiveTheUnfusedBits) {
  const std::vector<float> reference = delayed_run_bits(false, Recompute::none);
  EXPECT_GT(reference[0], 0.0f);  // a loss, not an empty run
  for (bool fused : {false, true})
    for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
      SCOPED_TRACE(testing::Message() << (fused ? "fused" : "unfused") << ", recompute "
                                      << static_cast<int>(recompute));
      const std::vector<float> bits = delayed_run_bits(fused, recompute);
      ASSERT_EQ(bits.size(), reference.size());
      EXPECT_EQ(0, std::memcmp(bits.data(), reference.data(), bits.size() * sizeof(float)));
    }
}

using tiny_trainer::losses_of;
using tiny_trainer::tiny;

std::vector<std::string> fp8_run(std::vector<std::string> more = {}) {
  std::vector<std::string> o = {"training.precision=fp8", "training.eval_interval=0",
                                "training.steps=30"};
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

// Delayed scaling's scale for an input is at most current scaling's (the
// history's amax is at least the step's), by a power of two: its codes are
// e4m3's rounding of the same values, a binade or two coarser near zero and
// saturated above the history's amax (none while the amaxes grow slowly).
// Step 1 has no history: current scaling's bits. After it the curves differ
// by rounding noise of the size fp8 itself adds to bf16's
// (test_trainer.cpp's Fp8FollowsTheBf16LossCurve: single steps within 0.1),
// asserted the same here, with its window bound on the mean. Measured
// (2026-11-29, 2-core VM): single steps within 0.0014, mean 0.0002.
TEST(Fp8Delayed, FollowsCurrentScalingAndItsFirstStepIsCurrents) {
  const int steps = 30;
  Trainer current(tiny(fp8_run()), comm_world());
  Trainer delayed(tiny(fp8_run({"training.fp8_scaling=delayed"})), comm_world());
  const std::vector<float> a = losses_of(current, steps), b = losses_of(delayed, steps);
  EXPECT_EQ(std::memcmp(&a[0], &b[0], sizeof(float)), 0) << a[0] << " vs " << b[0];
  double worst = 0, sum = 0;
  for (int s = 0; s < steps; ++s) {
    worst = std::max(worst, std::abs((double)a[s] - b[s]));
    sum += (double)a[s] - b[s];
  }
  RecordProperty("worst_step", std::to_string(worst));
  RecordProperty("mean_difference", std::to_string(sum / steps));
  EXPECT_LT(worst, 0.1);
  EXPECT_LT(std::abs(sum / steps), 0.02);
  EXPECT_LT(b.back(), b.front() - 0.5f) << "it learned";
}

TEST(Fp8Delayed, AResumedRunGivesTheUninterruptedBits) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "llm_test_fp8_delayed_resume";
  std::filesystem::remove_all(dir);
  // A history shorter than the steps before the save: it must have dropped
  // its oldest, and the resumed run must not see them.
  Config config = tiny(fp8_run({"training.fp8_scaling=delayed", "training.fp8_amax_history=2"}));
  config.checkpoint.dir = dir.string();
  Trainer whole(config, comm_world());
  const std::vector<float> uninterrupted = losses_of(whole, 6);
  std::string saved;
  {
    Trainer first(config, comm_world());
    losses_of(first, 3);
    saved = first.save_checkpoint(3);
  }
  Config resumed_config = config;
  resumed_config.checkpoint.resume = saved;
  Trainer resumed(resumed_config, comm_world());
  ASSERT_EQ(resumed.start_step(), 3);
  for (int s = 3; s < 6; ++s) {
    const float loss = resumed.train_step(s).loss;
    EXPECT_EQ(std::memcmp(&loss, &uninterrupted[s], sizeof loss), 0)
        << "step " << s + 1 << ": " << loss << " vs " << uninterrupted[s];
  }
  const nlohmann::json meta = nlohmann::json::parse(read_file(saved + "/meta.json"));
  ASSERT_TRUE(meta.contains("fp8_amax_history"));
  EXPECT_EQ(meta["fp8_amax_history"].size(), 2u);
  EXPECT_EQ(meta["fp8_amax_history"][0].size(), static_cast<size_t>(4 * config.model.n_layers));
  std::filesystem::remove_all(dir);
}

TEST(Fp8Delayed, NeedsPrecisionFp8) {
  const std::string message =
      test_support::error_of([] { tiny({"training.fp8_scaling=delayed"}); });
  EXPECT_NE(message.find("training.fp8_scaling = delayed needs training.precision = fp8"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace llm
