// `./train bench --attention` on the CPU: it times the config's shape, both
// passes, and states the forward's FLOPs as the causal count gives them
// (T (T + 1) / 2 query-key pairs per head and sequence, two products of 2 D
// FLOPs each, computed here on its own) and the backward's rate in both
// conventions, 2 and 2.5 forwards, whose ratio is therefore 1.25.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>

#include "commands/attention_bench.h"

namespace llm {
namespace {

TEST(AttentionBench, TimesBothPassesAndCountsTheCausalFlops) {
  Config config;
  config.path = "test";
  config.model.dim = 32;
  config.model.n_heads = 4;
  config.model.n_kv_heads = 2;
  config.training.micro_batch_size = 2;
  config.training.seq_len = 24;
  config.data.train = "unused";
  testing::internal::CaptureStdout();
  benchmark_attention(config, 3);
  const std::string out = testing::internal::GetCapturedStdout();

  const double B = 2, T = 24, H = 4, D = 32 / 4;
  const double forward = 2 * B * H * T * (T + 1) * D;  // 2 products x 2 D x T (T + 1) / 2
  EXPECT_NE(out.find("B=2 T=24 H=4 KV=2 D=8"), std::string::npos) << out;
  EXPECT_NE(out.find("forward " + std::to_string(static_cast<long>(forward)) + " FLOPs"),
            std::string::npos)
      << out;
  const std::regex row(
      R"(  (forward|backward) +([0-9.]+) ms +([0-9.e+-]+) TFLOP/s \(ours\) +([0-9.e+-]+) TFLOP/s)");
  int rows = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), row), end; it != end; ++it, ++rows) {
    const std::smatch& m = *it;
    const double ms = std::stod(m[2]), ours = std::stod(m[3]), published = std::stod(m[4]);
    const bool backward = m[1] == "backward";
    EXPECT_GT(ms, 0.0) << m[0];
    // The rate is the pass's FLOPs (the backward twice the forward's) over
    // its time: ms is printed to 0.0005, the rates to 4 digits.
    const double flops_tera = (backward ? 2 : 1) * forward * 1e-12;
    EXPECT_NEAR(ours * ms * 1e-3, flops_tera, flops_tera * (0.0005 / ms + 1e-3)) << m[0];
    EXPECT_NEAR(published / ours, backward ? 1.25 : 1.0, 1e-3) << m[0];
  }
  EXPECT_EQ(rows, 2) << out;  // the CPU has one backward algorithm
}

}  // namespace
}  // namespace llm
