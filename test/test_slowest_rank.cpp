// The slowest of N ranks (cost_models/slowest_rank.h): the expected maximum of
// N standard normal draws against its closed forms (N = 2..5) and against a
// seeded Monte Carlo draw (N = 8, 64, 512) within the draw's own error, the
// other order statistics against their identities, the straggler meter's
// reading against a draw and inverted to the dispersion behind it; and
// in the throughput model, the step waiting for the slowest rank: exactly
// nothing at zero dispersion (the same bits as a profile without the key) or
// on one rank, the compute stretched by the factor otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "cost_models/hardware_profile.h"
#include "cost_models/slowest_rank.h"
#include "cost_models/throughput_model.h"
#include "test/error_of.h"

namespace llm {
namespace {

using test_support::error_of;

// Simpson's rule errs by at most (b - a) h^4 max|f''''| / 180: with
// b - a = 24, h = 24 / 4096 and |f''''| of order 10 for these n (x phi(x)'s
// fourth derivative is a few units at most, times n up to 5),
// 24 x (24 / 4096)^4 x 10 / 180 = 1.6e-9. (It measures about 1e-14.)
constexpr double kQuadratureError = 2e-9;

// The mean of kTrials seeded samples of `sample` and its standard error
// s / sqrt(kTrials) (s: the samples' standard deviation).
constexpr int kTrials = 40000;
struct Draw {
  double mean, standard_error;
};
template <class Sample>
Draw monte_carlo(Sample&& sample) {
  double sum = 0, sum_squares = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const double x = sample();
    sum += x;
    sum_squares += x * x;
  }
  const double mean = sum / kTrials;
  return {mean, std::sqrt((sum_squares - kTrials * mean * mean) / (kTrials - 1) / kTrials)};
}

TEST(SlowestRank, ExpectedMaximumMatchesItsClosedForms) {
  const double pi = std::acos(-1.0);
  const double root_pi = std::sqrt(pi);
  EXPECT_EQ(normal_expected_maximum(1), 0.0);
  // David & Nagaraja, "Order Statistics": E[max] of 2, 3, 4, 5 normals.
  EXPECT_NEAR(normal_expected_maximum(2), 1 / root_pi, kQuadratureError);
  EXPECT_NEAR(normal_expected_maximum(3), 1.5 / root_pi, kQuadratureError);
  EXPECT_NEAR(normal_expected_maximum(4), 3 / root_pi * (0.5 + std::asin(1.0 / 3) / pi),
              kQuadratureError);
  EXPECT_NEAR(normal_expected_maximum(5), 5 / (4 * root_pi) * (1 + 6 / pi * std::asin(1.0 / 3)),
              kQuadratureError);
  EXPECT_NE(error_of([] { normal_expected_maximum(0); }).find("at least one draw"),
            std::string::npos);
}

// The mean of M seeded draws of max(Z_1..Z_n) has standard error s / sqrt(M)
// (s: the draws' sample standard deviation); a correct quadrature lies
// within 4 of them of it but for a chance of 6e-5. M = 40000 makes 4
// standard errors less than 1% of the expected maximum at every n tested,
// so the check would catch a 1% error.
TEST(SlowestRank, ExpectedMaximumAgreesWithAMonteCarloDraw) {
  std::mt19937_64 engine(60);
  std::normal_distribution<double> normal;
  for (int n : {8, 64, 512}) {
    SCOPED_TRACE(n);
    const Draw draw = monte_carlo([&] {
      double largest = -INFINITY;
      for (int i = 0; i < n; ++i) largest = std::max(largest, normal(engine));
      return largest;
    });
    const double expected = normal_expected_maximum(n);
    EXPECT_LT(4 * draw.standard_error, 0.01 * expected);
    EXPECT_NEAR(expected, draw.mean, 4 * draw.standard_error);
  }
}

// Order statistics obey identities no single one shows: E[Z_(k)] =
// -E[Z_(n+1-k)] (the normal is symmetric), and the n of them sum to n E[Z]
// = 0; each within the quadrature's error (n of them in the sum).
TEST(SlowestRank, OrderStatisticsAreSymmetricAndSumToZero) {
  EXPECT_NEAR(normal_expected_order_statistic(1, 2), -1 / std::sqrt(std::acos(-1.0)),
              kQuadratureError);
  EXPECT_NEAR(normal_expected_order_statistic(2, 3), 0, kQuadratureError);
  for (int n : {4, 8, 64}) {
    SCOPED_TRACE(n);
    double sum = 0;
    for (int k = 1; k <= n; ++k) {
      const double z = normal_expected_order_statistic(k, n);
      EXPECT_NEAR(z, -normal_expected_order_statistic(n + 1 - k, n), 2 * kQuadratureError);
      if (k > 1) {
        EXPECT_GT(z, normal_expected_order_statistic(k - 1, n));
      }
      sum += z;
    }
    EXPECT_NEAR(sum, 0, n * kQuadratureError);
  }
  EXPECT_EQ(normal_expected_order_statistic(8, 8), normal_expected_maximum(8));
  EXPECT_NE(error_of([] { normal_expected_order_statistic(3, 2); }).find("1 <= k <= n"),
            std::string::npos);
}

// The straggler meter reads the busiest rank over the lower median rank
// (sorted[(n - 1) / 2]); under normal draws its mean is E[max] - E[lower
// median], checked against a seeded draw within 4 standard errors as above,
// and rate_dispersion_of_spread inverts a reading of d times that to d.
TEST(SlowestRank, MeterReadingGivesBackTheDispersion) {
  std::mt19937_64 engine(61);
  std::normal_distribution<double> normal;
  for (int n : {2, 4, 64}) {
    SCOPED_TRACE(n);
    std::vector<double> z(static_cast<size_t>(n));
    const Draw draw = monte_carlo([&] {
      for (double& x : z) x = normal(engine);
      std::sort(z.begin(), z.end());
      return z.back() - z[static_cast<size_t>(n - 1) / 2];
    });
    const double expected =
        normal_expected_maximum(n) - normal_expected_order_statistic((n + 1) / 2, n);
    EXPECT_LT(4 * draw.standard_error, 0.02 * expected);
    EXPECT_NEAR(expected, draw.mean, 4 * draw.standard_error);
    EXPECT_NEAR(rate_dispersion_of_spread(0.03 * expected, n), 0.03, 1e-15);
  }
  EXPECT_NE(error_of([] { rate_dispersion_of_spread(0.1, 1); }).find("two ranks"),
            std::string::npos);
}

TEST(SlowestRank, NoSpreadOrOneRankWaitsForNothing) {
  for (int ranks : {1, 2, 8, 512, 1 << 20}) EXPECT_EQ(slowest_rank_factor(0.0, ranks), 1.0);
  EXPECT_EQ(slowest_rank_factor(0.05, 1), 1.0);
  EXPECT_DOUBLE_EQ(slowest_rank_factor(0.05, 512), 1 + 0.05 * normal_expected_maximum(512));
  EXPECT_NE(error_of([] { slowest_rank_factor(-0.01, 8); }).find("dispersion"), std::string::npos);
}

std::string a100_text() {
  std::ifstream in("cost_models/hardware/a100_80gb_roce.toml");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The A100 profile's text with device.rate_dispersion set to `value`, or
// without the line when `value` is empty.
std::string a100_text_with_dispersion(const std::string& value) {
  std::string text = a100_text();
  const size_t at = text.find("\nrate_dispersion = ");
  EXPECT_NE(at, std::string::npos);
  const size_t end = text.find('\n', at + 1);
  text.replace(at + 1, end - at, value.empty() ? "" : "rate_dispersion = " + value + "\n");
  return text;
}

TEST(SlowestRank, ProfileKeyIsOptionalAndChecked) {
  EXPECT_EQ(hardware_parse(a100_text_with_dispersion(""), "a100.toml").device.rate_dispersion, 0);
  EXPECT_EQ(hardware_parse(a100_text_with_dispersion("0.03"), "a100.toml").device.rate_dispersion,
            0.03);
  const std::string negative =
      error_of([] { hardware_parse(a100_text_with_dispersion("-0.01"), "a100.toml"); });
  EXPECT_NE(negative.find("a100.toml"), std::string::npos) << negative;
  EXPECT_NE(negative.find("device.rate_dispersion"), std::string::npos) << negative;
}

// tiny under full sharding on 4 A100s: with a spread the replay is the
// slowest rank's, its compute the mean rank's times the factor; with none,
// or on one rank, it is the same bits as a profile that never had the key.
TEST(SlowestRank, ThroughputModelWaitsForTheSlowestRank) {
  const Config config = config_load("configs/tiny.toml", {"parallel.mode=zero3"});
  const HardwareProfile without_key = hardware_parse(a100_text_with_dispersion(""), "no key");
  const HardwareProfile zero = hardware_parse(a100_text_with_dispersion("0.0"), "zero");
  const HardwareProfile spread = hardware_parse(a100_text_with_dispersion("0.05"), "spread");
  const StepPrediction base = throughput_predict(config, 4, without_key);
  const StepPrediction none = throughput_predict(config, 4, zero);
  EXPECT_EQ(none.straggler_seconds, 0.0);
  EXPECT_EQ(none.step_seconds, base.step_seconds);
  EXPECT_EQ(none.compute_seconds, base.compute_seconds);
  EXPECT_EQ(none.tflops_per_rank, base.tflops_per_rank);

  const StepPrediction slow = throughput_predict(config, 4, spread);
  const double factor = slowest_rank_factor(0.05, 4);
  EXPECT_GT(factor, 1.05);  // E[max of 4] = 1.03: a visible stretch
  EXPECT_NEAR(slow.compute_seconds, base.compute_seconds * factor, 1e-12 * slow.compute_seconds);
  EXPECT_NEAR(slow.straggler_seconds, slow.compute_seconds - base.compute_seconds,
              1e-12 * slow.compute_seconds);
  EXPECT_GT(slow.step_seconds, base.step_seconds);

  const StepPrediction alone = throughput_predict(config, 1, spread);
  EXPECT_EQ(alone.straggler_seconds, 0.0);
  EXPECT_EQ(alone.step_seconds, throughput_predict(config, 1, without_key).step_seconds);
}

}  // namespace
}  // namespace llm
