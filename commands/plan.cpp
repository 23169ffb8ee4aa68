// `./train plan`: the ranked table, the rows not ranked, the recommendation
// and, with --measure, the predicted order against the measured one (see
// plan.h).
#include "commands/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "model/layout.h"
#include "cost_models/hardware_profile.h"
#include "cost_models/plan_ranking.h"
#include "base/error.h"
#include "base/system.h"

namespace llm {
namespace {

std::string command_line(const Config& config, int world) {
  std::string line = fmt::format("mpirun -np {} ./train --config {}", world, config.path);
  for (const std::string& o : config.overrides) line += " --" + o;
  return line;
}

std::string bytes(size_t n) { return format_bytes(static_cast<double>(n)); }

void print_header(const Config& config, const PlanOptions& o, const HardwareProfile& hw,
                  const MemoryBudget& budget) {
  const TrainingConfig& t = config.training;
  fmt::print(
      "plan for {}: {} parameters, {} ranks, micro-batch {} x {} tokens, global batch {}; "
      "device memory {} less {} reserved = {} usable\n",
      config.path, layout_build(config.model).total_numel, o.world, t.micro_batch_size, t.seq_len,
      t.batch_size, bytes(budget.device), bytes(budget.reserved), bytes(budget.usable()));
  fmt::print("speed: the throughput model on {} ({}{})\n", hw.name, hw.path,
             o.hardware.empty() ? fmt::format("; chosen for training.device = {}, --hardware "
                                              "names another",
                                              config.device())
                                : "");
  fmt::print(
      "rows that fit, fastest first by predicted step (the same global batch in every row); "
      "then rows the model could not rank; then rows that do not fit\n"
      "per rank; bf16 rows keep fp32 master weights and moments (sharded with the optimizer "
      "state) plus a bf16 compute copy, and reduce gradients in bf16{}\n"
      "offload rows: fp32 masters and AdamW moments in host memory (the host column, per "
      "rank), the device keeping the bf16 compute copy\n"
      "tensor-parallel rows (T > 1): each rank holds 1/T of every layer and of the vocabulary, "
      "and 1/T of the residual stream's rows (sequence parallelism)\n"
      "pipeline rows (P > 1): each rank holds one stage's blocks (the largest stage is shown, "
      "with the micro-batches in flight under the {} schedule); bubble: the share of a step "
      "every stage idles, (P - 1) / (M + P - 1) with M = {} / ({} x D) micro-batches\n",
      t.precision == Precision::fp8
          ? "; fp8 rows are bf16 rows whose activations add the FP8 copies of one block matmul's "
            "operands, and are rated at the bf16 peak"
          : "",
      config.parallel.pipeline_schedule, t.batch_size, t.micro_batch_size);
}

void print_table(const std::vector<RankedPlanRow>& ranked, int top) {
  fmt::print(
      "{:>3} {:<3} {:<3} {:<3} {:>6} {:<10} {:<10} {:<5} {:<7} {:>11} {:>11} {:>11} {:>11} "
      "{:>12} {:>11} {:>11} {:<4} {:>10} {:>12}\n",
      "#", "T", "P", "D", "bubble", "mode", "recompute", "dtype", "offload", "params", "grads",
      "optimizer", "buffers", "activations", "device", "host", "fits", "step s", "tokens/s/rank");
  const size_t shown = top > 0 ? std::min<size_t>(top, ranked.size()) : ranked.size();
  for (size_t i = 0; i < shown; ++i) {
    const PlanRow& r = ranked[i].row;
    const PlanSpeed& s = ranked[i].speed;
    const MemoryPlan& m = r.memory;
    fmt::print(
        "{:>3} {:<3} {:<3} {:<3} {:>5.1f}% {:<10} {:<10} {:<5} {:<7} {:>11} {:>11} {:>11} {:>11} "
        "{:>12} {:>11} {:>11} {:<4} {:>10} {:>12}\n",
        i + 1, r.tensor_parallel, r.pipeline_parallel, r.data_parallel, 100 * r.bubble, r.mode,
        r.recompute, r.precision, r.offload, bytes(m.state.params), bytes(m.state.grads),
        bytes(m.state.optimizer), bytes(m.state.buffers), bytes(m.activations), bytes(m.total()),
        r.offload == OffloadTarget::none ? "-" : bytes(m.state.host), r.fits ? "yes" : "no",
        s.ranked ? fmt::format("{:.4g}", s.step_seconds) : "-",
        s.ranked ? fmt::format("{:.4g}", s.tokens_per_second_per_rank) : "-");
  }
  if (shown < ranked.size()) fmt::print("({} of {} rows; --top K)\n", shown, ranked.size());
}

// Which fitting rows are not ranked and why, and how many rows do not fit.
void print_unranked(const std::vector<RankedPlanRow>& ranked, size_t usable) {
  std::map<std::string, int> reasons;
  int not_fitting = 0;
  for (const RankedPlanRow& r : ranked) {
    if (!r.speed.unranked_reason.empty()) ++reasons[r.speed.unranked_reason];
    if (!r.row.fits) ++not_fitting;
  }
  for (const auto& [reason, count] : reasons) {
    fmt::print("not ranked, {} fitting row(s): {}\n", count, reason);
  }
  if (not_fitting > 0) {
    fmt::print("not predicted, {} row(s) that do not fit in {} per rank\n", not_fitting,
               bytes(usable));
  }
}

void print_recommendation(const std::vector<RankedPlanRow>& ranked, const RankedPlanRow* best,
                          int world, size_t usable) {
  if (!best) {
    fmt::print(
        "nothing the model ranks fits in {} per rank with {:.0f}% to spare: use more ranks, a "
        "smaller micro-batch or sequence\n",
        bytes(usable), kRecommendedHeadroom * 100);
    return;
  }
  const PlanSpeed& s = best->speed;
  const size_t needed = best->row.memory.total();
  fmt::print(
      "recommended (the fastest predicted that fits with {:.0f}% of the usable memory to "
      "spare):\n  {}\n",
      kRecommendedHeadroom * 100, command_line(best->row.config, world));
  fmt::print(
      "  predicted step {:.4g} s, {:.4g} tokens/s per rank: compute {:.4g} + recomputation "
      "{:.4g} + contention {:.4g} + exposed communication {:.4g} + optimizer {:.4g} + bubble "
      "{:.4g} s\n",
      s.step_seconds, s.tokens_per_second_per_rank, s.compute_seconds, s.recompute_seconds,
      s.contention_seconds, s.exposed_comm_seconds, s.optimizer_seconds, s.bubble_seconds);
  if (s.straggler_seconds > 0) {
    fmt::print(
        "  of the compute, {:.4g} s is the wait for the slowest of {} ranks "
        "(device.rate_dispersion)\n",
        s.straggler_seconds, world);
  }
  fmt::print("  memory {} of {} usable per rank, {} headroom\n", bytes(needed), bytes(usable),
             bytes(usable - needed));
  const std::vector<const RankedPlanRow*> ties = plan_near_ties(ranked, *best, usable);
  if (ties.empty()) return;
  fmt::print(
      "a tie at the model's error ({:.0f}%, docs/throughput_model.md): other kinds of row "
      "predicted within it\n",
      100 * kThroughputModelError);
  for (const RankedPlanRow* tie : ties) {
    const PlanRow& r = tie->row;
    fmt::print(
        "  {}\n    predicted step {:.4g} s (+{:.1f}%), offload {}, recompute {}, memory {}{}\n",
        command_line(r.config, world), tie->speed.step_seconds,
        100 * (tie->speed.step_seconds / s.step_seconds - 1), r.offload, r.recompute,
        bytes(r.memory.total()),
        r.offload == OffloadTarget::none ? ""
                                         : fmt::format(" + {} host", bytes(r.memory.state.host)));
  }
}

// Runs the first rows here and sets the measured order beside the predicted
// one; the check passes when the recommendation is the measured fastest, or
// within kThroughputModelError of it.
void measure_rows(const std::vector<RankedPlanRow>& ranked, const RankedPlanRow* best,
                  const PlanOptions& o) {
  const size_t count = static_cast<size_t>(o.top > 0 ? o.top : 3);
  std::vector<size_t> rows;
  for (size_t i = 0; i < ranked.size() && ranked[i].speed.ranked; ++i) {
    if (i < count || &ranked[i] == best) rows.push_back(i);
  }
  LLM_CHECK(best && !rows.empty(), "./train plan --measure: no ranked row to measure");
  LLM_CHECK(o.run.repeats >= 1, "--repeats: expected at least 1 run per row");
  // Round-robin over the rows, R rounds, keeping each row's fastest: a burst
  // of load from other jobs then disturbs one run of several rows, not every
  // run of one.
  MeasureOptions once = o.run;
  once.repeats = 1;
  std::vector<double> measured(rows.size(), std::numeric_limits<double>::infinity());
  for (int round = 0; round < o.run.repeats; ++round) {
    for (size_t k = 0; k < rows.size(); ++k) {
      const Config& c = ranked[rows[k]].row.config;
      fmt::print(stderr, "measuring {} ...\n", command_line(c, o.world));
      measured[k] = std::min(measured[k], measure_step_seconds(c.path, c.overrides, o.world, once));
    }
  }
  fmt::print(
      "\nmeasured here (median step, the fastest of {} run(s) each):\n{:>3} {:>13} {:>13} {:>8}\n",
      o.run.repeats, "#", "predicted ms", "measured ms", "error");
  for (size_t k = 0; k < rows.size(); ++k) {
    const double predicted = ranked[rows[k]].speed.step_seconds;
    fmt::print("{:>3} {:>13.1f} {:>13.1f} {:>+7.1f}%\n", rows[k] + 1, predicted * 1e3,
               measured[k] * 1e3, 100 * (predicted / measured[k] - 1));
  }
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return measured[a] < measured[b]; });
  std::string predicted_order, measured_order;
  for (size_t k = 0; k < rows.size(); ++k) {
    predicted_order += fmt::format(" #{}", rows[k] + 1);
    measured_order += fmt::format(" #{}", rows[order[k]] + 1);
  }
  fmt::print("predicted order:{}\nmeasured order: {}\n", predicted_order, measured_order);
  const size_t best_index = static_cast<size_t>(best - ranked.data());
  const size_t recommended =
      static_cast<size_t>(std::find(rows.begin(), rows.end(), best_index) - rows.begin());
  const double slower = measured[recommended] / measured[order.front()] - 1;
  const bool passed = slower <= kThroughputModelError;
  fmt::print(
      "check {}: the recommendation (#{}) measures {:.1f}% slower than the measured fastest "
      "(#{}); the model's stated error is {:.0f}%\n",
      passed ? "passed" : "failed", rows[recommended] + 1, 100 * slower, rows[order.front()] + 1,
      100 * kThroughputModelError);
}

}  // namespace

std::string plan_default_hardware(const Config& config) {
  return config.device() == Device::cuda ? "cost_models/hardware/h100_sxm.toml"
                                         : "cost_models/hardware/cpu_dev_vm.toml";
}

int plan_command(const Config& config, const PlanOptions& o) {
  LLM_CHECK(o.world >= 1, "--world: expected at least 1 rank, got {}", o.world);
  LLM_CHECK(o.top >= 0, "--top: expected a count of rows, got {}", o.top);
  const HardwareProfile hw =
      hardware_load(o.hardware.empty() ? plan_default_hardware(config) : o.hardware);
  const int ranks_per_node = std::min(o.world, hw.node.devices_per_node);
  MemoryBudget budget = hw.rank_memory(ranks_per_node);
  if (o.device_memory) budget.device = *o.device_memory;
  if (o.reserved_memory) budget.reserved = *o.reserved_memory;
  LLM_CHECK(budget.reserved < budget.device, "--reserved ({}) must be less than the memory ({})",
            bytes(budget.reserved), bytes(budget.device));
  const int hybrid_group = o.hybrid_group > 0 ? o.hybrid_group : ranks_per_node;
  const size_t usable = budget.usable();
  const std::vector<RankedPlanRow> ranked = plan_rank(
      plan_memory(config, o.world, hybrid_group, usable, hw.node.devices_per_node), o.world, hw);
  const RankedPlanRow* best = plan_recommend(ranked, usable);
  print_header(config, o, hw, budget);
  print_table(ranked, o.top);
  print_unranked(ranked, usable);
  print_recommendation(ranked, best, o.world, usable);
  if (o.measure) measure_rows(ranked, best, o);
  return 0;
}

}  // namespace llm
