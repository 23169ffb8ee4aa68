// The slowest of N ranks whose compute rates vary: each rank's compute time
// is drawn as the mean rank's x (1 + d Z), Z standard normal and d the
// profile's device.rate_dispersion (the relative standard deviation of the
// rate, to first order), and a step that synchronizes the N ranks waits for
// the largest draw. Pure functions; the derivation and the source of d:
// docs/throughput_model.md, "The slowest GPU".
// Invariant: a dispersion of 0, or a group of one rank, costs exactly
// nothing (slowest_rank_factor returns 1.0).
#pragma once

namespace llm {

// E[max(Z_1, ..., Z_n)] for n independent standard normal draws: the
// order-statistic integral of x n phi(x) Phi(x)^(n-1) by composite Simpson
// quadrature; 0 for n = 1.
double normal_expected_maximum(int n);

// The slowest of `ranks` ranks' expected compute time over the mean rank's:
// 1 + dispersion x normal_expected_maximum(ranks).
double slowest_rank_factor(double dispersion, int ranks);

}  // namespace llm
