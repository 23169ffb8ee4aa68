// StragglerMeter: one all-gather of a float per rank per log line.
#include "trainer/straggler_meter.h"

#include <algorithm>
#include <vector>

#include "cost_models/slowest_rank.h"

namespace llm {

void StragglerMeter::add(double step_seconds, double waited_seconds) {
  ++steps_;
  busy_seconds_ += std::max(0.0, step_seconds - waited_seconds);
}

StragglerReport StragglerMeter::take() {
  const float busy_ms = steps_ > 0 ? static_cast<float>(busy_seconds_ / steps_ * 1e3) : 0.0f;
  steps_ = 0;
  busy_seconds_ = 0;
  StragglerReport report;
  if (world_.size() < 2) return report;
  std::vector<float> busy(static_cast<size_t>(world_.size()));
  world_.all_gather(&busy_ms, busy.data(), 1, WireType::f32);
  report.ranks = world_.size();
  report.rank = static_cast<int>(std::max_element(busy.begin(), busy.end()) - busy.begin());
  report.busy_ms = busy[static_cast<size_t>(report.rank)];
  std::vector<float> sorted = busy;
  // The lower median: with two ranks, the other one.
  const size_t middle = (sorted.size() - 1) / 2;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(middle), sorted.end());
  const double median = sorted[middle];
  report.behind_ms = report.busy_ms - median;
  report.behind_fraction = median > 0 ? report.behind_ms / median : 0;
  report.rate_dispersion = rate_dispersion_of_spread(report.behind_fraction, report.ranks);
  return report;
}

}  // namespace llm
