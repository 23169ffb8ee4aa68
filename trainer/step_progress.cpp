// StepProgress: unit passes counted into a terminal-only progress line.
#include "trainer/step_progress.h"

#include <fmt/format.h>

#include <algorithm>

namespace llm {
namespace {

ProgressOptions step_options(bool enabled) {
  ProgressOptions options;
  options.enabled = enabled;
  options.unit = ProgressUnit::fraction;
  options.style = ProgressStyle::terminal_only;
  options.show_after = StepProgress::kShowAfterSeconds;
  return options;
}

int units_held(const ParameterLayout& layout) {
  return static_cast<int>(std::count_if(layout.units.begin(), layout.units.end(),
                                        [](const UnitSpec& unit) { return unit.numel > 0; }));
}

}  // namespace

StepProgress::StepProgress(UnitProvider& units, const ParameterLayout& layout, std::string label,
                           int micro_batches, bool full_recompute, bool enabled,
                           ProgressOutput output)
    : units_(units),
      micro_batches_(micro_batches),
      units_per_pass_(units_held(layout)),
      backward_weight_(full_recompute ? 3 : 2),
      progress_(std::move(label),
                static_cast<uint64_t>(micro_batches) * units_per_pass_ * (1 + backward_weight_),
                step_options(enabled), std::move(output)) {}

void StepProgress::begin_pass(int micro, bool backward) {
  passes_work_ += static_cast<uint64_t>(pass_weight_) * units_per_pass_;
  pass_weight_ = backward ? backward_weight_ : 1;
  pass_units_ = 0;
  progress_.set_detail(fmt::format("micro-batch {}/{} {}", micro + 1, micro_batches_,
                                   backward ? "backward" : "forward"));
  progress_.set(passes_work_);
}

void StepProgress::release_params(int unit, Pass pass) {
  units_.release_params(unit, pass);
  if (pass == Pass::forward) unit_done();
}

void StepProgress::release_grads(int unit) {
  units_.release_grads(unit);
  unit_done();
}

void StepProgress::unit_done() {
  pass_units_ = std::min(pass_units_ + 1, units_per_pass_);
  progress_.set(passes_work_ + static_cast<uint64_t>(pass_weight_) * pass_units_);
}

}  // namespace llm
