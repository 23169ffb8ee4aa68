// The whole model against an independent naive implementation: a double-
// precision forward composed of the reference ops (test/reference_ops.h, plain
// loops), whose central finite differences give every parameter's gradient.
// Also: the parameter layout, deterministic initialization, and a tiny model
// overfitting one batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <random>

#include "base/error.h"
#include "base/fp8.h"
#include "model/block.h"
#include "model/kernels/rope.h"
#include "model/transformer.h"
#include "parallel/sharding_engine.h"
#include "test/naive_model.h"
#include "test/random_tokens.h"
#include "test/unit_values.h"
#include "test/vector_source.h"

namespace llm {
namespace {

using naive::NamedParams;
using reference::Vec;

Config tiny_config(bool tied, int n_heads = 2, int n_kv_heads = 1) {
  Config c;
  c.path = "test";
  c.model.dim = 8;
  c.model.n_layers = 2;
  c.model.n_heads = n_heads;
  c.model.n_kv_heads = n_kv_heads;
  c.model.ffn_dim = 12;
  c.model.vocab_size = 11;
  c.model.tie_embeddings = tied;
  c.model.init_std = 0.3;  // large enough that every op matters to the loss
  c.training.seed = 7;
  c.data.train = "unused";
  return c;
}

// Forward and backward of one micro-batch through the whole (one-stage)
// model, accumulating its gradients; returns its mean loss.
float forward_backward(Transformer& model, UnitProvider& units, const std::vector<int32_t>& inputs,
                       const std::vector<int32_t>& targets, int B, int T, float dloss) {
  const float forward_loss =
      model.stage_forward(units, 0, inputs.data(), targets.data(), B, T, dloss);
  return forward_loss + model.stage_backward(units, 0, B, T);
}

// One model shape of the naive comparison.
struct ModelCase {
  const char* name;
  bool tied;
  int n_heads, n_kv_heads;
  double norm_eps;
  bool qk_norm = false;
  int head_dim = 0;  // 0: dim / n_heads
  bool qkv_bias = false;
};

// One kv head cannot tell a query head's kv head h / (H / KV) from h % KV;
// four query heads over two kv heads can. An eps near mean(x^2) (the
// embedding rows have mean square ~0.09 at init_std 0.3) pins where RMSNorm
// adds it: 1 / sqrt(ms + eps) and 1 / (sqrt(ms) + eps) then differ by ~10%.
const ModelCase kModelCases[] = {
    {"TiedOneKvHead", true, 2, 1, 1e-5},
    {"UntiedOneKvHead", false, 2, 1, 1e-5},
    {"UntiedGroupedQueryAttention", false, 4, 2, 1e-5},
    {"TiedNormEpsNearMeanSquare", true, 4, 2, 0.1},
    {"UntiedGroupedQueryAttentionQkNorm", false, 4, 2, 1e-5, true},
    // Qwen3-0.6B's kind: heads wider than dim / n_heads (4 x 6 = 24 > dim 8).
    {"HeadDimApartFromDimQkNorm", false, 4, 2, 1e-5, true, 6},
    // Qwen2's kind: q, k and v biases (set to random values below, so that
    // the forward's addition matters too), and before QK-norm when both are on.
    {"UntiedGroupedQueryAttentionQkvBias", false, 4, 2, 1e-5, false, 0, true},
    {"TiedQkvBiasBeforeQkNorm", true, 4, 2, 1e-5, true, 0, true},
};

// Every q, k and v bias set to a random value (they start at zero).
void randomize_qkv_biases(const ParameterLayout& layout, ShardingEngine& engine) {
  std::vector<float> params = engine.gather_all_params();
  std::vector<size_t> unit_begin(layout.units.size(), 0);
  for (size_t u = 1; u < layout.units.size(); ++u)
    unit_begin[u] = unit_begin[u - 1] + layout.units[u - 1].numel;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.3f);  // init_std's scale
  for (const TensorSpec& t : layout.tensors) {
    if (!t.name.ends_with(".attn.bqkv")) continue;
    float* bias = params.data() + unit_begin[t.unit] + t.offset;
    for (size_t i = 0; i < t.numel; ++i) bias[i] = normal(rng);
  }
  test_support::VectorSource source(layout, params);
  engine.load_state(source, /*with_moments=*/false);
}

void PrintTo(const ModelCase& c, std::ostream* out) { *out << c.name; }

class ModelVsNaive : public ::testing::TestWithParam<ModelCase> {};

// Loss within 1e-5 relative (fp32 model vs double reference); each gradient
// within 2e-5 + 1e-3 * |g| of the central difference (step 1e-5 in double, so
// truncation error ~1e-10 is far below the fp32 rounding of the model).
TEST_P(ModelVsNaive, LossAndEveryParameterGradientMatch) {
  const ModelCase& shape = GetParam();
  Config c = tiny_config(shape.tied, shape.n_heads, shape.n_kv_heads);
  c.model.norm_eps = shape.norm_eps;
  c.model.qk_norm = shape.qk_norm;
  c.model.head_dim = shape.head_dim;
  c.model.qkv_bias = shape.qkv_bias;
  const int B = 2, T = 5, N = B * T;
  const std::unique_ptr<Transformer> model = Transformer::create(c.model, B, T, backend_cpu());
  Topology topology(comm_world(), c.parallel);
  ShardingEngine engine(model->layout(), c, backend_cpu(), topology);
  if (shape.qkv_bias) randomize_qkv_biases(model->layout(), engine);
  std::vector<int32_t> inputs = random_tokens(N, c.model.vocab_size, 1);
  std::vector<int32_t> targets = random_tokens(N, c.model.vocab_size, 2);

  engine.zero_grads();
  float loss = forward_backward(*model, engine, inputs, targets, B, T, 1.0f / N);
  NamedParams params = naive::named_params(model->layout(), engine);
  double expected = naive::loss(c.model, params, inputs, targets, B, T);
  EXPECT_NEAR(loss, expected, 1e-5 * std::abs(expected));
  EXPECT_NEAR(model->forward(engine, inputs.data(), targets.data(), B, T), expected,
              1e-5 * std::abs(expected));

  const double h = 1e-5;
  int checked = 0;
  for (const TensorSpec& t : model->layout().tensors) {
    std::vector<float> unit_grads(model->layout().units[t.unit].numel);
    engine.gather_grads(t.unit, unit_grads.data());
    const float* grad = unit_grads.data() + t.offset;
    Vec& values = params.at(t.name);
    for (size_t i = 0; i < t.numel; ++i) {
      double saved = values[i];
      values[i] = saved + h;
      double up = naive::loss(c.model, params, inputs, targets, B, T);
      values[i] = saved - h;
      double down = naive::loss(c.model, params, inputs, targets, B, T);
      values[i] = saved;
      double fd = (up - down) / (2 * h);
      ASSERT_NEAR(grad[i], fd, 2e-5 + 1e-3 * std::abs(fd)) << t.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(model->layout().total_numel));
}

// Document masking against the naive model's: sequences of T = 12 packing
// several documents (token 1 is the BOS that starts one, or the EOS that
// ends one, Qwen's way; a sequence's first tokens are a document too), the
// targets that cross a boundary dropped as the data loader drops them, with
// positions reset and not, with neither, QK-norm or the q, k and v biases
// (each of which applies RoPE at the reset positions in its own pass; the
// biases random, as above). Loss and every gradient as above; and
// the masked loss differs from the unmasked one, so the mask is not a no-op in
// any form.
TEST(DocumentMasking, LossAndEveryGradientMatchTheNaiveModel) {
  Config c = tiny_config(false, 4, 2);
  const int B = 2, T = 12, N = B * T;
  const int32_t marker = 1;
  for (auto [qk_norm, qkv_bias] :
       {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    SCOPED_TRACE(testing::Message() << "qk_norm " << qk_norm << " qkv_bias " << qkv_bias);
    c.model.qk_norm = qk_norm;
    c.model.qkv_bias = qkv_bias;
    for (bool ends : {false, true}) {
      for (bool reset : {true, false}) {
        SCOPED_TRACE(ends ? "1 ends a document" : "1 starts a document");
        SCOPED_TRACE(reset ? "positions reset" : "positions run on");
        std::vector<int32_t> inputs = random_tokens(N, c.model.vocab_size, 3);
        for (int32_t& token : inputs)
          token = token == marker ? marker + 1 : token;  // set below only
        for (int at : {4, 9, T + 6}) inputs[ends ? at - 1 : at] = marker;
        std::vector<int32_t> targets = random_tokens(N, c.model.vocab_size, 4);
        for (int n = 0; n + 1 < N; ++n) {
          if ((n + 1) % T != 0) targets[n] = inputs[n + 1];  // next tokens, as in the data
          // The target that crosses a boundary.
          if ((ends ? inputs[n] : targets[n]) == marker) targets[n] = -1;
        }
        const std::unique_ptr<Transformer> model =
            Transformer::create(c.model, B, T, backend_cpu());
        model->set_document_masking({marker, ends}, reset);
        Topology topology(comm_world(), c.parallel);
        ShardingEngine engine(model->layout(), c, backend_cpu(), topology);
        if (qkv_bias) randomize_qkv_biases(model->layout(), engine);
        int kept = 0;
        for (int32_t target : targets) kept += target >= 0;
        engine.zero_grads();
        const float loss = forward_backward(*model, engine, inputs, targets, B, T, 1.0f / kept);
        NamedParams params = naive::named_params(model->layout(), engine);
        const naive::Documents documents{marker, reset, ends};
        const double expected = naive::loss(c.model, params, inputs, targets, B, T, documents);
        EXPECT_NEAR(loss * N / kept, expected, 1e-5 * std::abs(expected));  // loss: sum over N
        const double unmasked = naive::loss(c.model, params, inputs, targets, B, T);
        EXPECT_GT(std::abs(expected - unmasked), 1e-3 * std::abs(expected));
        const NamedParams grads =
            naive::gradient(c.model, params, inputs, targets, B, T, 1e-5, documents);
        for (const TensorSpec& t : model->layout().tensors) {
          std::vector<float> unit_grads(model->layout().units[t.unit].numel);
          engine.gather_grads(t.unit, unit_grads.data());
          const Vec& fd = grads.at(t.name);
          for (size_t i = 0; i < t.numel; ++i) {
            ASSERT_NEAR(unit_grads[t.offset + i], fd[i], 2e-5 + 1e-3 * std::abs(fd[i]))
                << t.name << "[" << i << "]";
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ModelVsNaive, ::testing::ValuesIn(kModelCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Llama 3.1 8B's scaling (theta 500000, D 128, factor 8, low 1, high 4,
// original context 8192). Pair i has wavelength 2 pi theta^(2i/D); it is
// below 8192 / 4 = 2048 for i < 64 ln(2048 / 2 pi) / ln(500000) = 28.2 and
// above 8192 / 1 for i > 64 ln(8192 / 2 pi) / ln(500000) = 34.98: pairs 0-28
// keep their frequency, 35-63 run 8 times slower, and 29-34 blend between
// the two, slower the longer their wavelength.
TEST(RopeScaling, Llama31KeepsBlendsAndSlowsPairsByWavelength) {
  const int D = 128;
  const double theta = 500000.0;
  const RopeScaling scaling{8.0, 1.0, 4.0, 8192};
  double last_ratio = 1.0;
  for (int i = 0; i < D / 2; ++i) {
    const double unscaled = rope_frequency(i, D, theta, RopeScaling{});
    EXPECT_EQ(unscaled, std::pow(theta, -2.0 * i / D)) << i;
    const double ratio = rope_frequency(i, D, theta, scaling) / unscaled;
    if (i <= 28) {
      EXPECT_EQ(ratio, 1.0) << i;
    } else if (i >= 35) {
      EXPECT_DOUBLE_EQ(ratio, 1.0 / 8) << i;
    } else {
      EXPECT_GT(ratio, 1.0 / 8) << i;
      EXPECT_LT(ratio, last_ratio) << i;
    }
    last_ratio = ratio;
  }
}

TEST(Layout, UnitsAreContiguousAndTensorsHaveLlamaShapes) {
  Config c = tiny_config(false);
  ParameterLayout layout = layout_build(c.model);
  ASSERT_EQ(layout.units.size(), static_cast<size_t>(c.model.n_layers + 2));
  size_t total = 0;
  for (const UnitSpec& u : layout.units) {
    size_t offset = 0;
    for (int ti : u.tensors) {
      EXPECT_EQ(layout.tensors[ti].offset, offset) << layout.tensors[ti].name;
      offset += layout.tensors[ti].numel;
    }
    EXPECT_EQ(offset, u.numel);
    total += u.numel;
  }
  EXPECT_EQ(total, layout.total_numel);
  const int D = c.model.dim / c.model.n_heads;
  EXPECT_EQ(layout.tensors[layout.find("layers.1.attn.wqkv")].shape,
            (std::vector<int64_t>{(c.model.n_heads + 2 * c.model.n_kv_heads) * D, c.model.dim}));
  EXPECT_EQ(layout.tensors[layout.find("layers.0.mlp.w13")].shape,
            (std::vector<int64_t>{2 * c.model.ffn_dim, c.model.dim}));
  EXPECT_FALSE(layout.tensors[layout.find("norm.weight")].weight_decay);
  EXPECT_TRUE(layout.tensors[layout.find("lm_head.weight")].weight_decay);
  EXPECT_THROW(layout.find("lm_head.weight.x"), Error);
}

// The block offsets the model reads are where the named tensors sit, in every
// block a layout holds, whole or sliced by tensor and pipeline parallelism,
// with and without QK-norm's rows and the q, k and v biases' row.
TEST(Layout, BlockTensorsNameTheOffsetsOfEveryHeldBlock) {
  for (auto [qk_norm, qkv_bias] :
       {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    SCOPED_TRACE(testing::Message() << "qk_norm " << qk_norm << " qkv_bias " << qkv_bias);
    Config c = tiny_config(false, 4, 2);
    c.model.n_layers = 3;
    c.model.vocab_size = 12;  // even, so two tensor ranks split it
    c.model.qk_norm = qk_norm;
    c.model.qkv_bias = qkv_bias;
    const std::vector<BlockTensorSpec> table = block_tensors(c.model);
    for (ModelSlice slice :
         {ModelSlice{}, ModelSlice{1, 2, 0, 1}, ModelSlice{0, 1, 1, 2}, ModelSlice{1, 2, 0, 2}}) {
      SCOPED_TRACE(testing::Message() << "tp " << slice.tp_rank << "/" << slice.tp_size << " pp "
                                      << slice.pp_rank << "/" << slice.pp_size);
      const ParameterLayout layout = layout_build(c.model, slice);
      ASSERT_GT(layout.layers.count(), 0);
      for (int l = layout.layers.begin; l < layout.layers.end; ++l) {
        const std::string p = "layers." + std::to_string(l);
        auto offset = [&](const std::string& name) {
          const TensorSpec& t = layout.tensors[layout.find(p + name)];
          EXPECT_EQ(t.unit, layout.block_unit(l)) << name;
          return t.offset;
        };
        ASSERT_EQ(layout.block.offsets.size(), table.size());
        for (size_t row = 0; row < table.size(); ++row)
          EXPECT_EQ(layout.block.offsets[row], offset("." + table[row].name));
      }
    }
  }
}

// The q, k and v biases (model.qkv_bias): one vector stacked as wqkv's rows
// are, split across tensor ranks as those rows are (each rank its heads'
// entries), starting at zero and never decayed.
TEST(Layout, QkvBiasSplitsAsWqkvRowsAndStartsAtZero) {
  Config c = tiny_config(false, 4, 2);
  c.model.vocab_size = 12;
  c.model.qkv_bias = true;
  const int64_t C = c.model.dim, rows = (4 + 2 * 2) * (C / 4);
  for (int rank : {0, 1}) {
    SCOPED_TRACE(testing::Message() << "tensor rank " << rank);
    const ParameterLayout layout = layout_build(c.model, {rank, 2, 0, 1});
    const TensorSpec& bias = layout.tensors[layout.find("layers.1.attn.bqkv")];
    const TensorSpec& weight = layout.tensors[layout.find("layers.1.attn.wqkv")];
    EXPECT_EQ(bias.shape, std::vector<int64_t>{rows / 2});
    EXPECT_EQ(bias.global_shape, std::vector<int64_t>{rows});
    EXPECT_FALSE(bias.weight_decay);
    EXPECT_FALSE(bias.replicated);
    EXPECT_EQ(bias.init, TensorInit::zeros);
    // Run by run, the bias entries are the rows of wqkv's run.
    ASSERT_EQ(bias.runs.size(), weight.runs.size());
    ASSERT_EQ(bias.runs.size(), 3u);  // its q heads, its k heads, its v heads
    for (size_t i = 0; i < bias.runs.size(); ++i) {
      EXPECT_EQ(bias.runs[i].local * C, weight.runs[i].local) << i;
      EXPECT_EQ(bias.runs[i].global * C, weight.runs[i].global) << i;
      EXPECT_EQ(bias.runs[i].length * C, weight.runs[i].length) << i;
    }
    const int unit = layout.block_unit(1);
    std::vector<float> values(layout.units[unit].numel, 1.0f);
    layout_init_params(layout, c.model, 5, unit, 0, values.size(), values.data());
    for (size_t i = 0; i < bias.numel; ++i) ASSERT_EQ(values[bias.offset + i], 0.0f) << i;
    EXPECT_NE(values[weight.offset], 0.0f);
  }
}

TEST(Layout, SliceInitializationMatchesWholeUnit) {
  Config c = tiny_config(true);
  ParameterLayout layout = layout_build(c.model);
  const int unit = layout.block_unit(1);
  const size_t n = layout.units[unit].numel;
  std::vector<float> whole(n), sliced(n);
  layout_init_params(layout, c.model, 99, unit, 0, n, whole.data());
  const size_t cut = n / 3 + 1;  // deliberately inside a tensor
  layout_init_params(layout, c.model, 99, unit, 0, cut, sliced.data());
  layout_init_params(layout, c.model, 99, unit, cut, n, sliced.data() + cut);
  EXPECT_EQ(whole, sliced);
  const TensorSpec& norm = layout.tensors[layout.find("layers.1.attn_norm.weight")];
  EXPECT_EQ(whole[norm.offset], 1.0f);
  std::vector<float> other_seed(n);
  layout_init_params(layout, c.model, 100, unit, 0, n, other_seed.data());
  EXPECT_NE(whole, other_seed);
}

// Pipeline stages hold consecutive blocks, as even as the count allows (the
// earlier stages take the remainder); a stage's layout keeps the whole
// model's unit numbering, its other units empty, and each tensor it holds
// has the whole model's index, offset and initial values.
TEST(Layout, PipelineStagesHoldConsecutiveBlocksUnderWholeModelIndices) {
  auto range = [](int layers, int stages, int stage) {
    LayerRange r = pipeline_stage_layers(layers, stages, stage);
    return std::pair{r.begin, r.end};
  };
  EXPECT_EQ(range(5, 3, 0), std::pair(0, 2));
  EXPECT_EQ(range(5, 3, 1), std::pair(2, 4));
  EXPECT_EQ(range(5, 3, 2), std::pair(4, 5));
  EXPECT_EQ(range(4, 4, 3), std::pair(3, 4));
  EXPECT_THROW(pipeline_stage_layers(2, 3, 0), Error);

  Config c = tiny_config(false);
  c.model.n_layers = 3;
  const ParameterLayout whole = layout_build(c.model);
  size_t held = 0;
  for (int stage = 0; stage < 2; ++stage) {
    const ParameterLayout part = layout_build(c.model, {0, 1, stage, 2});
    ASSERT_EQ(part.units.size(), whole.units.size());
    EXPECT_EQ(part.global_tensor_count, static_cast<int>(whole.tensors.size()));
    EXPECT_EQ(part.units[part.embed_unit()].numel > 0, stage == 0);
    EXPECT_EQ(part.units[part.head_unit()].numel > 0, stage == 1);
    for (int l = 0; l < c.model.n_layers; ++l) {
      const bool mine = l >= part.layers.begin && l < part.layers.end;
      EXPECT_EQ(part.units[part.block_unit(l)].numel > 0, mine)
          << "stage " << stage << " block " << l;
    }
    for (size_t u = 0; u < part.units.size(); ++u) {
      EXPECT_EQ(part.units[u].global_numel, whole.units[u].numel);
      if (part.units[u].numel == 0) continue;
      EXPECT_EQ(part.units[u].numel, whole.units[u].numel);
      std::vector<float> a(part.units[u].numel), b(a.size());
      layout_init_params(part, c.model, 5, static_cast<int>(u), 0, a.size(), a.data());
      layout_init_params(whole, c.model, 5, static_cast<int>(u), 0, b.size(), b.data());
      EXPECT_EQ(a, b) << part.units[u].name;
    }
    for (const TensorSpec& t : part.tensors) {
      const TensorSpec& w = whole.tensors[whole.find(t.name)];
      EXPECT_EQ(t.global_index, w.global_index) << t.name;
      EXPECT_EQ(t.unit, w.unit) << t.name;
      EXPECT_EQ(t.offset, w.offset) << t.name;
    }
    held += part.total_numel;
  }
  EXPECT_EQ(held, whole.total_numel);
}

// Activation recomputation recomputes with the same kernels in the same order:
// every gradient is bit-identical to the run that kept everything, for full
// and selective recomputation and for recomputing every block or every
// other one; and it keeps less.
TEST(ActivationRecomputation, GradientsAreBitIdenticalAndMemoryShrinks) {
  Config c = tiny_config(true);
  c.model.n_layers = 3;
  const int B = 2, T = 5, N = B * T;
  std::vector<int32_t> inputs = random_tokens(N, c.model.vocab_size, 5);
  std::vector<int32_t> targets = random_tokens(N, c.model.vocab_size, 6);
  Topology topology(comm_world(), c.parallel);
  auto gradients = [&](RecomputePlan plan, size_t* bytes) {
    const std::unique_ptr<Transformer> model =
        Transformer::create(c.model, B, T, backend_cpu(), plan);
    ShardingEngine engine(model->layout(), c, backend_cpu(), topology);
    engine.zero_grads();
    forward_backward(*model, engine, inputs, targets, B, T, 1.0f / N);
    *bytes = model->activation_bytes().total;
    return test_support::unit_grads(engine, model->layout());
  };
  size_t kept_bytes = 0;
  const std::vector<float> reference = gradients({Recompute::none, 1}, &kept_bytes);
  for (Recompute mode : {Recompute::full, Recompute::selective}) {
    for (int every : {1, 2}) {
      SCOPED_TRACE(std::string(mode == Recompute::full ? "full" : "selective") + " every " +
                   std::to_string(every));
      size_t bytes = 0;
      std::vector<float> g = gradients({mode, every}, &bytes);
      ASSERT_EQ(g.size(), reference.size());
      EXPECT_EQ(0, std::memcmp(g.data(), reference.data(), g.size() * sizeof(float)));
      EXPECT_LT(bytes, kept_bytes);
    }
  }
  // What each kind of block keeps, as documented in docs/memory.md.
  ActivationBytes none = Transformer::activation_bytes(c.model, B, T, {Recompute::none, 1});
  ActivationBytes full = Transformer::activation_bytes(c.model, B, T, {Recompute::full, 1});
  ActivationBytes selective =
      Transformer::activation_bytes(c.model, B, T, {Recompute::selective, 1});
  EXPECT_EQ(full.per_block_recomputed, 0u);  // the input lives in the residual stream
  EXPECT_GT(selective.per_block_recomputed, 0u);
  EXPECT_LT(selective.per_block_recomputed, none.per_block_kept);
  EXPECT_EQ(none.recompute_scratch, 0u);
  EXPECT_EQ(full.recompute_scratch, none.per_block_kept);
  EXPECT_EQ(none.total - full.total, 3 * none.per_block_kept - full.recompute_scratch);
}

// The per-block activation bytes are exactly the documented formula (docs/memory.md,
// "Fitting a model in memory"), up to 64-byte alignment of its 10 buffers;
// with the head dim apart from dim / n_heads too (model.head_dim).
TEST(ActivationRecomputation, PerBlockBytesFollowTheFormula) {
  ModelConfig m;
  m.dim = 96, m.n_heads = 6, m.n_kv_heads = 2, m.ffn_dim = 200, m.n_layers = 2;
  for (int head_dim : {0, 24}) {
    m.head_dim = head_dim;
    const int B = 3, T = 7;
    const double N = B * T, C = m.dim, F = m.ffn_dim, H = m.n_heads,
                 D = head_dim ? head_dim : C / H;
    const double QKV = (H + 2 * m.n_kv_heads) * D, HD = H * D;
    for (auto [precision, e] : {std::pair{Precision::fp32, 4.0}, std::pair{Precision::bf16, 2.0}}) {
      ActivationBytes kept =
          Transformer::activation_bytes(m, B, T, {Recompute::none, 1}, precision);
      ActivationBytes sel =
          Transformer::activation_bytes(m, B, T, {Recompute::selective, 1}, precision);
      double kept_formula = e * N * (QKV + HD + 3 * C + 3 * F) + 4 * N * (H + 2);
      double selective_formula = e * N * (QKV + HD + C + 2 * F) + 4 * N * H;
      EXPECT_GE(kept.per_block_kept, kept_formula);
      EXPECT_LT(kept.per_block_kept, kept_formula + 10 * 64);
      EXPECT_GE(sel.per_block_recomputed, selective_formula);
      EXPECT_LT(sel.per_block_recomputed, selective_formula + 5 * 64);
    }
  }
}

// precision fp8 adds the FP8 copies of one block matmul's activations to the
// bf16 activations, and every block weight's codes, and nothing else: the
// input (N x widest input), the output gradient and its transpose (N x
// widest output each), two scales, the input's and the output gradients' row
// amaxes (N and 2 N floats), and per block its four matrices' codes
// row-major and transposed with a scale each, and their inputs' scales (one
// micro-batch in flight); one byte a value, up to 64-byte alignment of its
// 6 + 16 L buffers.
TEST(ActivationRecomputation, Fp8CopiesFollowTheFormula) {
  ModelConfig m;
  m.dim = 96, m.n_heads = 6, m.n_kv_heads = 2, m.ffn_dim = 200, m.n_layers = 2;
  const int B = 3, T = 7;
  const double N = B * T, C = m.dim, F = m.ffn_dim, H = m.n_heads, D = C / H;
  const double QKV = (H + 2 * m.n_kv_heads) * D, HD = H * D;
  const ActivationBytes bf16 =
      Transformer::activation_bytes(m, B, T, {Recompute::none, 1}, Precision::bf16);
  const ActivationBytes fp8 =
      Transformer::activation_bytes(m, B, T, {Recompute::none, 1}, Precision::fp8);
  const double widest_input = std::max({C, HD, F}), widest_output = std::max({QKV, C, 2 * F});
  const double block_weights =
      2 * (QKV * C + C * HD + 2 * F * C + C * F) + 2 * 4 * sizeof(Fp8Scale);
  const double formula = N * widest_input + 2 * N * widest_output + 2 * sizeof(Fp8Scale) +
                         3 * N * sizeof(float) + m.n_layers * block_weights;
  EXPECT_EQ(bf16.fp8_copies, 0u);
  EXPECT_GE(fp8.fp8_copies, formula);
  EXPECT_LT(fp8.fp8_copies, formula + (6 + 16 * m.n_layers) * 64);
  EXPECT_EQ(fp8.total, bf16.total + fp8.fp8_copies);
  EXPECT_EQ(fp8.per_block_kept, bf16.per_block_kept);
}

// A tiny model memorizes one fixed batch: the loss must drop below 0.05.
TEST(Model, OverfitsOneBatch) {
  Config c;
  c.path = "test";
  c.model.dim = 32;
  c.model.n_layers = 2;
  c.model.n_heads = 4;
  c.model.n_kv_heads = 2;
  c.model.ffn_dim = 64;
  c.model.vocab_size = 64;
  c.training.lr = 1e-2;
  c.training.weight_decay = 0;
  c.data.train = "unused";
  const int B = 2, T = 16, N = B * T;
  const std::unique_ptr<Transformer> model = Transformer::create(c.model, B, T, backend_cpu());
  Topology topology(comm_world(), c.parallel);
  ShardingEngine engine(model->layout(), c, backend_cpu(), topology);
  std::vector<int32_t> inputs = random_tokens(N, c.model.vocab_size, 3);
  std::vector<int32_t> targets = random_tokens(N, c.model.vocab_size, 4);
  float loss = 0;
  int step = 0;
  for (; step < 300; ++step) {
    engine.zero_grads();
    loss = forward_backward(*model, engine, inputs, targets, B, T, 1.0f / N);
    if (loss < 0.05f) break;
    engine.optimizer_step({static_cast<float>(c.training.lr), 1.0f, step + 1});
  }
  EXPECT_LT(loss, 0.05f) << "after " << step << " steps";
}

}  // namespace
}  // namespace llm
