// The slowest of N ranks whose compute rates vary: each rank's compute time
// is drawn as the mean rank's x (1 + d Z), Z standard normal and d the
// profile's device.rate_dispersion (the relative standard deviation of the
// rate, to first order), and a step that synchronizes the N ranks waits for
// the largest draw; a run's measured spread gives d back. Pure functions;
// the derivation and the source of d: docs/throughput_model.md, "The
// slowest GPU".
// Invariant: a dispersion of 0, or a group of one rank, costs exactly
// nothing (slowest_rank_factor returns 1.0).
#pragma once

namespace llm {

// E[Z_(k)], the k-th smallest of n independent standard normal draws
// (1 <= k <= n): the order-statistic integral of x times its density by
// composite Simpson quadrature; 0 for n = 1.
double normal_expected_order_statistic(int k, int n);
// E[max(Z_1, ..., Z_n)]: the n-th of n.
double normal_expected_maximum(int n);

// The slowest of `ranks` ranks' expected compute time over the mean rank's:
// 1 + dispersion x normal_expected_maximum(ranks).
double slowest_rank_factor(double dispersion, int ranks);

// The dispersion a straggler meter's reading implies (trainer/
// straggler_meter.h: the busiest of `ranks` ranks' busy time over the lower
// median rank's, less 1): under the draws above that reading is, to first
// order, dispersion x (E[max] - E[lower median]), so this divides by it.
double rate_dispersion_of_spread(double behind_fraction, int ranks);

}  // namespace llm
