// Generation on the GPU (skips where there is no CUDA device): the key/value
// cache's decode gives forward()'s logits over the whole sequence on CUDA in
// fp32 and bf16 (the tolerances of test_generate.cpp), with QK-norm too, and
// greedy decoding on CUDA picks the CPU's tokens.
#include <gtest/gtest.h>

#include <vector>

#include "model/generate.h"
#include "test/generation_checks.h"
#include "test/gpu_test_support.h"

namespace llm {
namespace {

using namespace test_support;

TEST(GpuGenerate, CachedDecodeLogitsEqualTheFullForward) {
  LLM_SKIP_WITHOUT_GPU();
  expect_decode_matches_forward(backend_cuda(), Precision::fp32, 1e-4);
}

TEST(GpuGenerate, CachedDecodeLogitsEqualTheFullForwardInBf16) {
  LLM_SKIP_WITHOUT_GPU();
  expect_decode_matches_forward(backend_cuda(), Precision::bf16, 2e-2);
}

// QK-norm applies RoPE in its own kernel, from the decode position when decoding.
TEST(GpuGenerate, CachedDecodeLogitsEqualTheFullForwardWithQkNormInBf16) {
  LLM_SKIP_WITHOUT_GPU();
  expect_decode_matches_forward(backend_cuda(), Precision::bf16, 2e-2, /*qk_norm=*/true);
}

// The q, k and v biases' kernel applies RoPE (no QK-norm), from the decode position when decoding.
TEST(GpuGenerate, CachedDecodeLogitsEqualTheFullForwardWithQkvBiasInBf16) {
  LLM_SKIP_WITHOUT_GPU();
  expect_decode_matches_forward(backend_cuda(), Precision::bf16, 2e-2, /*qk_norm=*/false,
                                /*qkv_bias=*/true);
}

TEST(GpuGenerate, GreedyTokensAreTheCpus) {
  LLM_SKIP_WITHOUT_GPU();
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 16;
  Generator cpu(backend_cpu()), gpu(backend_cuda());
  EXPECT_EQ(generate(*gpu.model, gpu.params, kGenerationPrompt, 2, greedy),
            generate(*cpu.model, cpu.params, kGenerationPrompt, 2, greedy));
}

}  // namespace
}  // namespace llm
