// precision fp8 casts each block weight once per parameter version
// (UnitProvider::params_version) and keeps its codes, both ways, across
// micro-batches and the backward: the casts a step makes are counted, and
// the kept codes give the bits of casting at every use.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "model/transformer.h"
#include "parallel/sharding_engine.h"
#include "test/fp8_test_config.h"
#include "test/random_tokens.h"
#include "test/unit_values.h"

namespace llm {
namespace {

Config fp8_config() { return test_support::fp8_test_config(5); }

// The CPU backend, counting its FP8 casts.
int casts = 0;
void counting_cast(uint8_t* codes, uint8_t* codes_t, const Bf16* x, int rows, int cols,
                   const Fp8Scale* scale, Fp8Format format) {
  ++casts;
  cpu::fp8_cast_transpose(codes, codes_t, x, rows, cols, scale, format);
}
Backend counting_backend() {
  Backend backend = backend_cpu();
  backend.fp8_cast_transpose = counting_cast;
  return backend;
}

// The engine's parameters, under a version that moves at every question:
// the model casts every weight at every use, as it did before it kept them.
class EveryUseAnotherVersion : public UnitProvider {
 public:
  explicit EveryUseAnotherVersion(UnitProvider& units) : units_(units) {}
  const void* acquire_params(int unit, Pass pass) override {
    return units_.acquire_params(unit, pass);
  }
  void release_params(int unit, Pass pass) override { units_.release_params(unit, pass); }
  float* acquire_grads(int unit) override { return units_.acquire_grads(unit); }
  void release_grads(int unit) override { units_.release_grads(unit); }
  uint64_t params_version() const override { return ++version_; }

 private:
  UnitProvider& units_;
  mutable uint64_t version_ = 0;
};

constexpr int kB = 2, kT = 6, kN = kB * kT;

// Per micro-batch, each block casts 4 inputs in the forward and, in the
// backward, each of its 4 matrices' output gradient and input: 12 casts;
// its 4 weights are cast once per parameter version.
void expect_casts_once_per_parameter_version(const Config& c) {
  const int L = c.model.n_layers, M = 3;
  const Backend backend = counting_backend();
  const std::unique_ptr<Transformer> model =
      Transformer::create(c.model, kB, kT, backend, {}, c.precision());
  Topology topology(comm_world(), c.parallel);
  ShardingEngine engine(model->layout(), c, backend, topology);
  const std::vector<int32_t> inputs = random_tokens(kN, c.model.vocab_size, 1);
  const std::vector<int32_t> targets = random_tokens(kN, c.model.vocab_size, 2);
  auto micro_batch = [&] {
    model->stage_forward(engine, 0, inputs.data(), targets.data(), kB, kT, 1.0f / kN);
    model->stage_backward(engine, 0, kB, kT);
  };
  engine.zero_grads();
  casts = 0;
  for (int m = 0; m < M; ++m) micro_batch();
  EXPECT_EQ(casts, 4 * L + 12 * L * M) << "one step of " << M << " micro-batches";

  engine.optimizer_step({1e-3f, 1.0f, 1});  // new parameters: cast again, once
  engine.zero_grads();
  casts = 0;
  for (int m = 0; m < M; ++m) micro_batch();
  EXPECT_EQ(casts, 4 * L + 12 * L * M) << "the step after an optimizer step";

  casts = 0;  // evaluation at the same version casts only its inputs
  model->forward(engine, inputs.data(), targets.data(), kB, kT);
  EXPECT_EQ(casts, 4 * L);
}

TEST(Fp8Weights, CastOncePerParameterVersion) {
  expect_casts_once_per_parameter_version(fp8_config());
}

// The q, k and v biases are added to the bf16 output of the FP8 GEMM: a
// model with them casts what one without them casts, nothing more.
TEST(Fp8Weights, QkvBiasesAreAddedInBf16AfterTheGemm) {
  Config c = fp8_config();
  c.model.qkv_bias = true;
  expect_casts_once_per_parameter_version(c);
}

// Kept codes are the codes a cast at every use gives: the same gradients,
// bit for bit, over several micro-batches.
TEST(Fp8Weights, KeptCodesGiveTheBitsOfCastingAtEveryUse) {
  const Config c = fp8_config();
  const std::vector<int32_t> inputs = random_tokens(kN, c.model.vocab_size, 3);
  const std::vector<int32_t> targets = random_tokens(kN, c.model.vocab_size, 4);
  auto gradients = [&](bool cast_every_use) {
    const std::unique_ptr<Transformer> model =
        Transformer::create(c.model, kB, kT, backend_cpu(), {}, c.precision());
    Topology topology(comm_world(), c.parallel);
    ShardingEngine engine(model->layout(), c, backend_cpu(), topology);
    EveryUseAnotherVersion every_use(engine);
    UnitProvider& units = cast_every_use ? static_cast<UnitProvider&>(every_use) : engine;
    engine.zero_grads();
    float loss = 0;
    for (int m = 0; m < 3; ++m) {
      model->stage_forward(units, 0, inputs.data(), targets.data(), kB, kT, 1.0f / kN);
      loss += model->stage_backward(units, 0, kB, kT);
    }
    std::vector<float> all = test_support::unit_grads(engine, model->layout());
    all.insert(all.begin(), loss);
    return all;
  };
  const std::vector<float> kept = gradients(false), recast = gradients(true);
  ASSERT_EQ(kept.size(), recast.size());
  EXPECT_EQ(0, std::memcmp(kept.data(), recast.data(), kept.size() * sizeof(float)));
  EXPECT_GT(kept[0], 0.0f);
}

}  // namespace
}  // namespace llm
