// Expected order statistics of N normal draws, and what they give the
// throughput model and the straggler meter (see slowest_rank.h).
#include "cost_models/slowest_rank.h"

#include <cmath>

#include "base/error.h"

namespace llm {
namespace {

// Simpson's rule over [-kEdge, kEdge] in kIntervals steps (h = 24 / 4096).
// The integrand is smooth, and outside the interval it is below
// n phi(12) ~ n 1e-32 (above) and phi(12) (below), so for any int n the
// truncation is far below a double's precision of the result; against the
// closed forms for n = 2..5 the quadrature agrees to about 1e-14
// (test/test_slowest_rank.cpp).
constexpr double kEdge = 12.0;
constexpr int kIntervals = 4096;

// log Phi(x), accurate in both tails (Phi near 0 and near 1).
double log_normal_cdf(double x) {
  const double tail = 0.5 * std::erfc(std::fabs(x) / std::sqrt(2.0));  // Phi(-|x|)
  return x < 0 ? std::log(tail) : std::log1p(-tail);
}

}  // namespace

double normal_expected_order_statistic(int k, int n) {
  LLM_CHECK(n >= 1 && k >= 1 && k <= n,
            "normal_expected_order_statistic: needs at least one draw and 1 <= k <= n, got k = {}, "
            "n = {}",
            k, n);
  if (n == 1) return 0;  // one rank waits for no other
  // The k-th smallest of n has density n! / ((k-1)! (n-k)!) phi(x)
  // Phi(x)^(k-1) (1 - Phi(x))^(n-k).
  const double log_coefficient =
      std::lgamma(n + 1.0) - std::lgamma(static_cast<double>(k)) - std::lgamma(n - k + 1.0);
  const double h = 2 * kEdge / kIntervals;
  double sum = 0;
  for (int i = 0; i <= kIntervals; ++i) {
    const double x = -kEdge + i * h;
    const double log_density = log_coefficient - 0.5 * x * x - 0.5 * std::log(2 * M_PI) +
                               (k - 1) * log_normal_cdf(x) + (n - k) * log_normal_cdf(-x);
    const double weight = (i == 0 || i == kIntervals) ? 1 : (i % 2 ? 4 : 2);
    sum += weight * x * std::exp(log_density);
  }
  return sum * h / 3;
}

double normal_expected_maximum(int n) { return normal_expected_order_statistic(n, n); }

double slowest_rank_factor(double dispersion, int ranks) {
  LLM_CHECK(dispersion >= 0, "slowest_rank_factor: dispersion must not be negative, got {}",
            dispersion);
  if (dispersion == 0) return 1.0;  // no spread: nothing to wait for, and no quadrature
  return 1.0 + dispersion * normal_expected_maximum(ranks);
}

double rate_dispersion_of_spread(double behind_fraction, int ranks) {
  LLM_CHECK(ranks >= 2, "rate_dispersion_of_spread: a spread needs two ranks, got {}", ranks);
  LLM_CHECK(behind_fraction >= 0,
            "rate_dispersion_of_spread: the busiest rank cannot be behind the median by {}",
            behind_fraction);
  const int lower_median = (ranks + 1) / 2;  // the meter's: with two ranks, the other one
  return behind_fraction /
         (normal_expected_maximum(ranks) - normal_expected_order_statistic(lower_median, ranks));
}

}  // namespace llm
