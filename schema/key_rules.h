// What a configuration key promises besides its type, default and doc: the
// range its value must lie in, and what changing it on resume does. A key
// states them where it is declared (config.h's visit_fields()); validation,
// the resume check and the reference table derive from them. visit_keys()
// walks a table's keys with their rules, on a const table too.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace llm {

// The closed or open interval a number must lie in. Every float key must
// also be finite, whatever its range.
struct Range {
  double low = -std::numeric_limits<double>::infinity();
  double high = std::numeric_limits<double>::infinity();
  bool low_open = false, high_open = false;

  bool unbounded() const { return std::isinf(low) && std::isinf(high); }
  bool contains(double x) const {
    return (low_open ? x > low : x >= low) && (high_open ? x < high : x <= high);
  }
  // "positive", ">= 0", "in [0, 1)": what follows "must be".
  std::string text() const {
    if (std::isinf(high)) {
      if (low == 0 && low_open) return "positive";
      return fmt::format("{} {}", low_open ? ">" : ">=", low);
    }
    return fmt::format("in {}{}, {}{}", low_open ? '(' : '[', low, high, high_open ? ')' : ']');
  }
};
inline constexpr double kInfinity = std::numeric_limits<double>::infinity();
inline constexpr Range kPositive{0, kInfinity, true, true};
inline constexpr Range kNonNegative{0, kInfinity, false, true};
inline constexpr Range kUnitClosed{0, 1, false, false};
inline constexpr Range kUnitHalfOpen{0, 1, false, true};
inline constexpr Range kUnitOpen{0, 1, true, true};
constexpr Range at_least(double low) { return {low, kInfinity, false, true}; }

// What a changed value means to a run resumed from a checkpoint: another
// model (refused), another trajectory (allowed, listed in the log), or
// neither (a different device, batch split, recomputation, mesh or logging
// gives the same training within the modes' tolerances).
enum class OnResume { same_trajectory, changes_trajectory, changes_model };

// A key's rule. A key that states no on_resume takes its table's.
struct KeyRule {
  Range range;
  bool has_on_resume = false;
  OnResume on_resume = OnResume::same_trajectory;

  constexpr KeyRule() = default;
  constexpr KeyRule(Range r) : range(r) {}  // NOLINT: a range alone is a rule
  constexpr KeyRule(OnResume o) : has_on_resume(true), on_resume(o) {}  // NOLINT: so is this
  constexpr KeyRule(Range r, OnResume o) : range(r), has_on_resume(true), on_resume(o) {}
};

// Walks `table`'s keys as visit_fields() declares them, calling
// visit(key, field, doc, rule) for each (the rule defaulted where the key
// states none). On a const table every field is passed as const.
template <class Table, class Visit>
void visit_keys(Table& table, Visit&& visit) {
  using Mutable = std::remove_const_t<Table>;
  const_cast<Mutable&>(table).visit_fields(
      [&](const char* key, auto& field, const char* doc, KeyRule rule = {}) {
        if constexpr (std::is_const_v<Table>)
          visit(key, std::as_const(field), doc, rule);
        else
          visit(key, field, doc, rule);
      });
}

}  // namespace llm
