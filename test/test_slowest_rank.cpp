// The slowest of N ranks (planning/slowest_rank.h): the expected maximum of
// N standard normal draws against its closed forms (N = 2..5) and against a
// seeded Monte Carlo draw (N = 8, 64, 512) within the draw's own error, and
// exactly no wait at zero dispersion or on one rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "planning/slowest_rank.h"
#include "test/error_of.h"

namespace llm {
namespace {

using test_support::error_of;

// Simpson's rule errs by at most (b - a) h^4 max|f''''| / 180: with
// b - a = 24, h = 24 / 4096 and |f''''| of order 10 for these n (x phi(x)'s
// fourth derivative is a few units at most, times n up to 5),
// 24 x (24 / 4096)^4 x 10 / 180 = 1.6e-9. (It measures about 1e-14.)
constexpr double kQuadratureError = 2e-9;

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
  constexpr int kTrials = 40000;
  std::mt19937_64 engine(60);
  std::normal_distribution<double> normal;
  for (int n : {8, 64, 512}) {
    SCOPED_TRACE(n);
    double sum = 0, sum_squares = 0;
    for (int trial = 0; trial < kTrials; ++trial) {
      double largest = -INFINITY;
      for (int i = 0; i < n; ++i) largest = std::max(largest, normal(engine));
      sum += largest;
      sum_squares += largest * largest;
    }
    const double mean = sum / kTrials;
    const double variance = (sum_squares - kTrials * mean * mean) / (kTrials - 1);
    const double standard_error = std::sqrt(variance / kTrials);
    const double expected = normal_expected_maximum(n);
    EXPECT_LT(4 * standard_error, 0.01 * expected);
    EXPECT_NEAR(expected, mean, 4 * standard_error);
  }
}

TEST(SlowestRank, NoSpreadOrOneRankWaitsForNothing) {
  for (int ranks : {1, 2, 8, 512, 1 << 20}) EXPECT_EQ(slowest_rank_factor(0.0, ranks), 1.0);
  EXPECT_EQ(slowest_rank_factor(0.05, 1), 1.0);
  EXPECT_DOUBLE_EQ(slowest_rank_factor(0.05, 512), 1 + 0.05 * normal_expected_maximum(512));
  EXPECT_NE(error_of([] { slowest_rank_factor(-0.01, 8); }).find("dispersion"), std::string::npos);
}

}  // namespace
}  // namespace llm
