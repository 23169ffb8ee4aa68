// Loss-spike guard: running medians over the last accepted steps.
#include "trainer/spike_guard.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace llm {

namespace {

double median(const std::deque<double>& values) {
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

}  // namespace

SpikeGuard::SpikeGuard(double loss_factor, double grad_norm_factor, int window)
    : loss_factor_(loss_factor),
      grad_norm_factor_(grad_norm_factor),
      window_(static_cast<size_t>(std::max(window, kMinHistory))) {}

std::optional<SpikeVerdict> SpikeGuard::check(double loss, double grad_norm) {
  if (!enabled()) return std::nullopt;
  if (losses_.size() >= static_cast<size_t>(kMinHistory)) {
    const double median_loss = median(losses_), median_grad_norm = median(grad_norms_);
    std::string reason;
    if (loss_factor_ > 0 && loss > loss_factor_ * median_loss) {
      reason = fmt::format("loss {:.4g} > {:g} x median {:.4g}", loss, loss_factor_, median_loss);
    } else if (grad_norm_factor_ > 0 && grad_norm > grad_norm_factor_ * median_grad_norm) {
      reason = fmt::format("grad norm {:.4g} > {:g} x median {:.4g}", grad_norm, grad_norm_factor_,
                           median_grad_norm);
    }
    if (!reason.empty()) return SpikeVerdict{reason, median_loss, median_grad_norm};
  }
  losses_.push_back(loss);
  grad_norms_.push_back(grad_norm);
  if (losses_.size() > window_) {
    losses_.pop_front();
    grad_norms_.pop_front();
  }
  return std::nullopt;
}

}  // namespace llm
