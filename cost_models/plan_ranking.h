// `./train plan`'s ranking: the planner's rows that fit, ordered by the
// throughput model's predicted step time on a hardware profile (every row
// runs the same global batch, so the fastest step is the most tokens/s per
// rank), and the recommendation: the fastest that leaves
// kRecommendedHeadroom of the usable memory to spare. A row whose figure the
// profile lacks (hardware_profile.h, missing_figure) is not ranked, and
// says why, rather than guessed. Device-resident rows are predicted by
// throughput_predict, offloaded ones by offload_predict (the step of the
// row's offload mode); no cost is computed here. See docs/memory.md,
// "Planning a launch".
// Invariant: ranked rows come first, by increasing predicted step (ties in
// the planner's order); then fitting rows the model could not rank; then
// rows that do not fit, in the planner's order.
#pragma once

#include <string>
#include <vector>

#include "cost_models/hardware_profile.h"
#include "cost_models/planner.h"

namespace llm {

// Fraction of the usable memory the recommended setting leaves free, for
// fragmentation and transient buffers the plan does not list.
inline constexpr double kRecommendedHeadroom = 0.10;

// The throughput model's stated error: docs/throughput_model.md, "Validation
// on this machine" (scale_cpu within -11%..+9% in every mode at 1, 2 and 4
// ranks). Rows predicted within it of each other are a tie, not an order.
inline constexpr double kThroughputModelError = 0.11;

// A row's predicted step and its parts, which sum to step_seconds.
struct PlanSpeed {
  bool ranked = false;
  // Why a fitting row is not ranked (the figure the model lacks); empty for
  // ranked rows and for rows that do not fit (not predicted).
  std::string unranked_reason;
  double step_seconds = 0;
  double tokens_per_second_per_rank = 0;
  double compute_seconds = 0;       // forward + backward, without recomputation
  double straggler_seconds = 0;     // of compute + recomputation: waiting for the slowest rank
  double recompute_seconds = 0;     // forwards redone in backward
  double contention_seconds = 0;    // compute slowed by collectives beside it
  double exposed_comm_seconds = 0;  // communication compute does not hide
  double optimizer_seconds = 0;     // offloaded rows: the host path the step waits for
  double bubble_seconds = 0;        // pipeline stages idle
};

struct RankedPlanRow {
  PlanRow row;
  PlanSpeed speed;
};

// The prediction of one row at `world` ranks (not ranked, with the reason,
// when the profile lacks a figure the row needs).
PlanSpeed plan_row_speed(const PlanRow& row, int world, const HardwareProfile& hardware);

// Every row, predicted where it fits, in the order the invariant states.
std::vector<RankedPlanRow> plan_rank(std::vector<PlanRow> rows, int world,
                                     const HardwareProfile& hardware);

// The first ranked row using at most (1 - kRecommendedHeadroom) of
// usable_bytes: the fastest with headroom (nullptr when none).
const RankedPlanRow* plan_recommend(const std::vector<RankedPlanRow>& ranked, size_t usable_bytes);

// The choices the ranking cannot tell apart from `best`: for each other kind
// of row (offloaded or device-resident, with full recomputation or without),
// the fastest that fits with headroom and is predicted within
// kThroughputModelError of best's step, fastest first. An offloaded pick's
// device-resident twin, say, trades an estimated host path for device memory.
std::vector<const RankedPlanRow*> plan_near_ties(const std::vector<RankedPlanRow>& ranked,
                                                 const RankedPlanRow& best, size_t usable_bytes);

}  // namespace llm
