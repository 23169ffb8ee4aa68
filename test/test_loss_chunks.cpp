// The LM head and its loss a chunk of rows at a time (training.loss_chunk_tokens):
// any chunking gives the one-chunk run's loss and gradients, within the
// rounding of a reassociated sum, in fp32 and bf16, tied and untied; the
// evaluation forward gives the training loss; the activations hold one
// chunk's logits, and the automatic chunk follows its rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "data/targets.h"
#include "model/transformer.h"
#include "parallel/sharding_engine.h"
#include "test/random_tokens.h"

namespace llm {
namespace {

Config chunk_config(bool tied, Precision precision) {
  Config c;
  c.path = "test";
  c.model.dim = 16;
  c.model.n_layers = 2;
  c.model.n_heads = 2;
  c.model.n_kv_heads = 1;
  c.model.ffn_dim = 24;
  c.model.vocab_size = 37;
  c.model.tie_embeddings = tied;
  c.model.init_std = 0.3;  // large enough that every op matters to the loss
  c.training.seed = 11;
  c.training.precision = precision;
  c.data.train = "unused";
  return c;
}

struct ChunkRun {
  float loss = 0;                         // the training forward and backward's
  float evaluated = 0;                    // forward() with targets afterwards
  std::vector<std::vector<float>> grads;  // per unit
};

ChunkRun train_one_micro_batch(const Config& c, int B, int T, int loss_chunk_tokens) {
  const int N = B * T;
  const std::unique_ptr<Transformer> model =
      Transformer::create(c.model, B, T, backend_cpu(), {}, c.precision(), {}, loss_chunk_tokens);
  Topology topology(comm_world(), c.parallel);
  ShardingEngine engine(model->layout(), c, backend_cpu(), topology);
  const std::vector<int32_t> inputs = random_tokens(N, c.model.vocab_size, 3);
  std::vector<int32_t> targets = random_tokens(N, c.model.vocab_size, 4);
  targets[4] = kIgnoredTarget;  // a masked target inside a chunk: no loss, no gradient
  engine.zero_grads();
  ChunkRun run;
  run.loss = model->stage_forward(engine, 0, inputs.data(), targets.data(), B, T, 1.0f / N);
  EXPECT_EQ(run.loss, 0.0f) << "training forms its loss in the backward";
  run.loss = model->stage_backward(engine, 0, B, T);
  run.evaluated = model->forward(engine, inputs.data(), targets.data(), B, T);
  for (size_t u = 0; u < model->layout().units.size(); ++u) {
    run.grads.emplace_back(model->layout().units[u].numel);
    engine.gather_grads(static_cast<int>(u), run.grads.back().data());
  }
  return run;
}

// Chunks of 1, 3 (the last one short) and 4 rows against one chunk of all
// N = 10. Within a row nothing changes but the GEMM's row count, so a loss
// may move by the rounding of its logits' dot products; each weight
// gradient is a sum over the rows that chunking regroups. Tolerances:
// fp32: the head's K = 16-term dot products and the 10-row sums, each
// regrouped, move a value by at most ~(K + N) ulps of its terms' largest
// magnitude: 1e-5 of the unit's largest gradient (2^-24 * 26 = 1.5e-6, with
// margin for the terms exceeding the result). bf16: a logit whose fp32
// value moved may round to a neighbouring bf16 value (2^-8 relative), and
// every activation after it carries that: 2e-2 of the unit's largest.
// Measured on an AMD EPYC with AVX512-BF16 (2026-11-28): the losses equal,
// every gradient within 6e-8 of the one-chunk run's, in both precisions.
TEST(LossChunks, GiveTheOneChunkLossAndGradients) {
  const int B = 2, T = 5, N = B * T;
  for (Precision precision : {Precision::fp32, Precision::bf16}) {
    for (bool tied : {false, true}) {
      const Config c = chunk_config(tied, precision);
      const double tolerance = precision == Precision::fp32 ? 1e-5 : 2e-2;
      const ChunkRun whole = train_one_micro_batch(c, B, T, N);
      EXPECT_NEAR(whole.evaluated, whole.loss, tolerance * std::abs(whole.loss));
      for (int chunk : {1, 3, 4}) {
        SCOPED_TRACE(std::string(precision == Precision::fp32 ? "fp32" : "bf16") +
                     (tied ? " tied" : " untied") + ", chunks of " + std::to_string(chunk));
        const ChunkRun chunked = train_one_micro_batch(c, B, T, chunk);
        EXPECT_NEAR(chunked.loss, whole.loss, tolerance * std::abs(whole.loss));
        EXPECT_NEAR(chunked.evaluated, whole.loss, tolerance * std::abs(whole.loss));
        ASSERT_EQ(chunked.grads.size(), whole.grads.size());
        for (size_t u = 0; u < whole.grads.size(); ++u) {
          const std::vector<float>& want = whole.grads[u];
          float largest = 0;
          for (float g : want) largest = std::max(largest, std::abs(g));
          ASSERT_GT(largest, 0.0f) << "unit " << u << " has no gradient";
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(chunked.grads[u][i], want[i], tolerance * largest)
                << "unit " << u << " [" << i << "]";
        }
      }
    }
  }
}

// The activations hold one chunk's logits (R x V) and loss partials (R x 2
// fp32) instead of N rows of each: N - R rows fewer, up to the 64-byte
// alignment of those two buffers.
TEST(LossChunks, ActivationsHoldOneChunkOfLogits) {
  const Config c = chunk_config(false, Precision::bf16);
  const int B = 4, T = 64, N = B * T, R = 24;
  const ActivationBytes whole =
      Transformer::activation_bytes(c.model, B, T, {}, Precision::bf16, {}, 1, N);
  const ActivationBytes chunked =
      Transformer::activation_bytes(c.model, B, T, {}, Precision::bf16, {}, 1, R);
  const double saved = static_cast<double>(N - R) * (c.model.vocab_size * 2 + 2 * 4);
  const double measured = static_cast<double>(whole.head_and_loss - chunked.head_and_loss);
  EXPECT_NEAR(measured, saved, 2 * 64);
  EXPECT_EQ(whole.total - chunked.total, whole.head_and_loss - chunked.head_and_loss);
}

// training.loss_chunk_tokens = 0: as many rows as take kAutoLossChunkBytes of
// logits, in whole multiples of 64, at most the micro-batch; a request is
// taken as it is, up to the micro-batch.
TEST(LossChunks, AutomaticChunkFollowsItsRule) {
  ModelConfig llama3;
  llama3.vocab_size = 128256;
  // bf16, one rank: 2^28 / (128256 * 2) = 1046.6 rows -> 1024.
  EXPECT_EQ(loss_chunk_rows(llama3, 8192, 1, 2, 0), 1024);
  // Vocabulary over 8 tensor-parallel ranks: 2^28 / (16032 * 2) = 8372.2 -> 8320.
  EXPECT_EQ(loss_chunk_rows(llama3, 8192 * 2, 8, 2, 0), 8320);
  EXPECT_EQ(loss_chunk_rows(llama3, 500, 1, 2, 0), 500);  // the whole micro-batch fits
  // fp32 logits of a 2^26-entry vocabulary take 256 MiB a row: one row.
  ModelConfig huge;
  huge.vocab_size = 1 << 26;
  EXPECT_EQ(loss_chunk_rows(huge, 100, 1, 4, 0), 1);
  EXPECT_EQ(loss_chunk_rows(llama3, 8192, 1, 2, 100), 100);
  EXPECT_EQ(loss_chunk_rows(llama3, 64, 1, 2, 100), 64);
}

}  // namespace
}  // namespace llm
