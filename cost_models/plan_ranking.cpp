// Ranking the planner's rows by the throughput model's predicted step (see
// plan_ranking.h).
#include "cost_models/plan_ranking.h"

#include <algorithm>
#include <set>
#include <utility>

#include "cost_models/offload_model.h"
#include "cost_models/throughput_model.h"

namespace llm {

PlanSpeed plan_row_speed(const PlanRow& row, int world, const HardwareProfile& hardware) {
  PlanSpeed speed;
  speed.unranked_reason = hardware.missing_figure(row.config);
  if (!speed.unranked_reason.empty()) return speed;
  // The forward-backward parts come from the device step: the offload
  // model's offloaded prediction for an offloaded row, whose step is its
  // mode's; the optimizer is what is left of the step after them (the host
  // path the step waits for, for an offloaded row).
  StepPrediction step;
  const OffloadMode offload = offload_mode_of(row.config);
  if (offload == OffloadMode::none) {
    step = throughput_predict(row.config, world, hardware);
    speed.step_seconds = step.step_seconds;
  } else {
    const OffloadPrediction predicted = offload_predict(row.config, world, hardware);
    step = predicted.offloaded;
    speed.step_seconds = predicted[offload].step_seconds;
  }
  speed.ranked = true;
  speed.compute_seconds = step.compute_seconds - step.recompute_seconds;
  speed.recompute_seconds = step.recompute_seconds;
  speed.straggler_seconds = step.straggler_seconds;
  speed.contention_seconds = step.contention_seconds;
  speed.exposed_comm_seconds = step.exposed_comm_seconds;
  speed.bubble_seconds = step.pipeline_bubble_seconds;
  speed.optimizer_seconds = speed.step_seconds - step.compute_seconds - step.contention_seconds -
                            step.exposed_comm_seconds - step.pipeline_bubble_seconds;
  const TrainingConfig& t = row.config.training;
  speed.tokens_per_second_per_rank =
      static_cast<double>(t.batch_size) * t.seq_len / speed.step_seconds / world;
  return speed;
}

std::vector<RankedPlanRow> plan_rank(std::vector<PlanRow> rows, int world,
                                     const HardwareProfile& hardware) {
  std::vector<RankedPlanRow> ranked;
  ranked.reserve(rows.size());
  for (PlanRow& row : rows) {
    PlanSpeed speed = row.fits ? plan_row_speed(row, world, hardware) : PlanSpeed{};
    ranked.push_back({std::move(row), std::move(speed)});
  }
  auto group = [](const RankedPlanRow& r) { return r.speed.ranked ? 0 : r.row.fits ? 1 : 2; };
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](const RankedPlanRow& a, const RankedPlanRow& b) {
                     if (group(a) != group(b)) return group(a) < group(b);
                     return a.speed.ranked && a.speed.step_seconds < b.speed.step_seconds;
                   });
  return ranked;
}

namespace {

bool ranked_with_headroom(const RankedPlanRow& r, size_t usable_bytes) {
  const double limit = (1.0 - kRecommendedHeadroom) * static_cast<double>(usable_bytes);
  return r.speed.ranked && static_cast<double>(r.row.memory.total()) <= limit;
}

// What a near tie must differ from the pick in: where the optimizer state
// lives, and whether every block's forward is redone (selective
// recomputation predicts the same step as none, so it is no other choice).
std::pair<bool, bool> row_kind(const PlanRow& row) {
  return {row.offload != OffloadTarget::none, row.recompute == Recompute::full};
}

}  // namespace

const RankedPlanRow* plan_recommend(const std::vector<RankedPlanRow>& ranked, size_t usable_bytes) {
  for (const RankedPlanRow& r : ranked) {
    if (ranked_with_headroom(r, usable_bytes)) return &r;
  }
  return nullptr;
}

std::vector<const RankedPlanRow*> plan_near_ties(const std::vector<RankedPlanRow>& ranked,
                                                 const RankedPlanRow& best, size_t usable_bytes) {
  std::vector<const RankedPlanRow*> ties;
  std::set<std::pair<bool, bool>> kinds = {row_kind(best.row)};
  const double within = (1.0 + kThroughputModelError) * best.speed.step_seconds;
  for (const RankedPlanRow& r : ranked) {
    if (!ranked_with_headroom(r, usable_bytes) || r.speed.step_seconds > within) continue;
    if (kinds.insert(row_kind(r.row)).second) ties.push_back(&r);
  }
  return ties;
}

}  // namespace llm
