// The expected maximum of N normal draws (see slowest_rank.h).
#include "planning/slowest_rank.h"

#include <cmath>

#include "runtime/error.h"

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

double normal_expected_maximum(int n) {
  LLM_CHECK(n >= 1, "normal_expected_maximum: needs at least one draw, got {}", n);
  if (n == 1) return 0;  // one rank waits for no other
  const double h = 2 * kEdge / kIntervals;
  const double density_scale = 1 / std::sqrt(2 * M_PI);
  double sum = 0;
  for (int i = 0; i <= kIntervals; ++i) {
    const double x = -kEdge + i * h;
    const double density = n * density_scale * std::exp(-0.5 * x * x + (n - 1) * log_normal_cdf(x));
    const double weight = (i == 0 || i == kIntervals) ? 1 : (i % 2 ? 4 : 2);
    sum += weight * x * density;
  }
  return sum * h / 3;
}

double slowest_rank_factor(double dispersion, int ranks) {
  LLM_CHECK(dispersion >= 0, "slowest_rank_factor: dispersion must not be negative, got {}",
            dispersion);
  if (dispersion == 0) return 1.0;  // no spread: nothing to wait for, and no quadrature
  return 1.0 + dispersion * normal_expected_maximum(ranks);
}

}  // namespace llm
