// Generation (model/generate.h) against the model's own forward pass, on the
// CPU: the key/value cache's logits equal forward()'s rows over the whole
// sequence, greedy decoding with the cache picks forward()'s argmax at every
// step, and the sampler draws each token with its filtered softmax
// probability. (gpu_test_generate.cpp: the same on CUDA.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/generate.h"
#include "test/error_of.h"
#include "test/generation_checks.h"

namespace llm {
namespace {

using namespace test_support;

constexpr int kContext = kGenerationContext;
const std::vector<int32_t>& kPrompt = kGenerationPrompt;

int argmax(const std::vector<float>& x) {
  return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin());
}

// fp32: the cached attention sums the same terms as attention_forward in
// another order (~1e-7 relative each), through two blocks and the head: 1e-4
// of the logits' scale catches any wrong position, head or row. bf16: both
// paths round every activation to bf16 (2^-8 relative), and a one-ulp
// difference at one rounding propagates: 2e-2 still catches a wrong position
// (which changes logits by O(1)).
TEST(Generate, CachedDecodeLogitsEqualTheFullForward) {
  expect_decode_matches_forward(backend_cpu(), Precision::fp32, 1e-4);
}

TEST(Generate, CachedDecodeLogitsEqualTheFullForwardInBf16) {
  expect_decode_matches_forward(backend_cpu(), Precision::bf16, 2e-2);
}

// With QK-norm, which applies RoPE in its own pass (from the decode position
// when decoding, from each token's when not), with the same bound.
TEST(Generate, CachedDecodeLogitsEqualTheFullForwardWithQkNorm) {
  expect_decode_matches_forward(backend_cpu(), Precision::fp32, 1e-4, /*qk_norm=*/true);
}

// With the q, k and v biases (no QK-norm), whose pass applies RoPE (the
// biases start at zero: the rotation's angles are what decoding changes).
TEST(Generate, CachedDecodeLogitsEqualTheFullForwardWithQkvBias) {
  expect_decode_matches_forward(backend_cpu(), Precision::fp32, 1e-4, /*qk_norm=*/false,
                                /*qkv_bias=*/true);
}

TEST(Generate, GreedyWithTheCacheIsGreedyWithoutIt) {
  Generator g(backend_cpu());
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 12;
  const auto samples = generate(*g.model, g.params, kPrompt, 2, greedy);
  ASSERT_EQ(samples.size(), 2u);
  ASSERT_EQ(samples[0].size(), 12u);
  EXPECT_EQ(samples[0], samples[1]);
  // Without the cache: the whole sequence's forward at every step.
  std::vector<int32_t> tokens = kPrompt;
  for (int32_t token : samples[0]) {
    EXPECT_EQ(token, argmax(g.full_forward_logits(tokens)))
        << "after " << tokens.size() << " tokens";
    tokens.push_back(token);
  }
}

TEST(Generate, SeededSamplesRepeatAndDifferAcrossSeedsAndSamples) {
  Generator g(backend_cpu());
  SamplingOptions options;
  options.temperature = 1.0f;
  options.top_k = 0;
  options.max_new_tokens = 10;
  options.seed = 5;
  const auto first = generate(*g.model, g.params, kPrompt, 2, options);
  EXPECT_EQ(generate(*g.model, g.params, kPrompt, 2, options), first);
  EXPECT_NE(first[0], first[1]) << "two samples of one prompt drew the same 10 tokens";
  options.seed = 6;
  EXPECT_NE(generate(*g.model, g.params, kPrompt, 2, options), first);
}

TEST(Generate, StopsAtTheStopTokenAndWhenTheCacheIsFull) {
  Generator g(backend_cpu());
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 100;
  const std::vector<int32_t> unbounded = generate(*g.model, g.params, kPrompt, 1, greedy)[0];
  // The prompt and every token but the last one sampled fill the context.
  EXPECT_EQ(unbounded.size(), static_cast<size_t>(kContext) - kPrompt.size() + 1);
  greedy.stop_token = unbounded[3];
  const std::vector<int32_t> stopped = generate(*g.model, g.params, kPrompt, 1, greedy)[0];
  const size_t first =
      std::find(unbounded.begin(), unbounded.end(), unbounded[3]) - unbounded.begin();
  EXPECT_EQ(stopped, std::vector<int32_t>(unbounded.begin(), unbounded.begin() + first + 1));
}

TEST(Generate, RefusesAPromptLongerThanTheCache) {
  Generator g(backend_cpu());
  const std::vector<int32_t> long_prompt(kContext + 1, 1);
  EXPECT_NE(
      error_of([&] { generate(*g.model, g.params, long_prompt, 1, {}); }).find("context of 24"),
      std::string::npos);
}

// The probability the sampler gives each token: the share of a fine uniform
// grid that maps to it. Against softmax(logits / temperature) restricted to
// the top_k / top_p candidates and renormalized, computed here in index order.
TEST(SampleToken, DrawsEachTokenWithItsFilteredSoftmaxProbability) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 1.0f, -0.5f, 2.5f};
  const int V = static_cast<int>(logits.size());
  struct Filter {
    float temperature;
    int top_k;
    float top_p;
  };
  for (const Filter f : {Filter{1.0f, 0, 1.0f}, Filter{0.5f, 0, 1.0f}, Filter{1.0f, 3, 1.0f},
                         Filter{1.0f, 0, 0.6f}, Filter{2.0f, 5, 0.9f}}) {
    SCOPED_TRACE(testing::Message() << "temperature " << f.temperature << " top_k " << f.top_k
                                    << " top_p " << f.top_p);
    std::vector<double> p(V);
    for (int v = 0; v < V; ++v) p[v] = std::exp(logits[v] / f.temperature);
    // Rank of each token (0 = likeliest); keep the top_k, then the top_p nucleus.
    std::vector<int> rank(V);
    for (int v = 0; v < V; ++v) {
      rank[v] = static_cast<int>(
          std::count_if(logits.begin(), logits.end(), [&](float w) { return w > logits[v]; }));
    }
    const int k = f.top_k > 0 ? f.top_k : V;
    int kept = k;
    for (int r = 0; r < k; ++r) {
      double mass = 0;
      for (int v = 0; v < V; ++v) mass += rank[v] <= r ? p[v] : 0;
      double top_k_mass = 0;
      for (int v = 0; v < V; ++v) top_k_mass += rank[v] < k ? p[v] : 0;
      if (f.top_p < 1.0f && mass / top_k_mass >= f.top_p) {
        kept = r + 1;
        break;
      }
    }
    double kept_mass = 0;
    for (int v = 0; v < V; ++v) kept_mass += rank[v] < kept ? p[v] : 0;

    SamplingOptions options;
    options.temperature = f.temperature;
    options.top_k = f.top_k;
    options.top_p = f.top_p;
    constexpr int kGrid = 100000;
    std::vector<int> hits(V, 0);
    for (int i = 0; i < kGrid; ++i)
      ++hits[sample_token(logits.data(), V, options, (i + 0.5) / kGrid)];
    for (int v = 0; v < V; ++v) {
      const double expected = rank[v] < kept ? p[v] / kept_mass : 0.0;
      EXPECT_NEAR(hits[v] / static_cast<double>(kGrid), expected, 2.0 / kGrid) << "token " << v;
    }
  }
}

TEST(SampleToken, TemperatureZeroIsTheArgmax) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.5f, 0.0f};
  SamplingOptions greedy;
  greedy.temperature = 0;
  for (double u : {0.0, 0.5, 0.999}) EXPECT_EQ(sample_token(logits.data(), 5, greedy, u), 3);
}

}  // namespace
}  // namespace llm
