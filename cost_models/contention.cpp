// Compute progressing beside collectives (see contention.h).
#include "cost_models/contention.h"

#include <algorithm>

namespace llm {

void ComputeTimeline::hold(double start, double end, int blocks) {
  if (end <= start || blocks <= 0) return;
  holds_.push_back({start, end, blocks});
  active_.push_back({start, end, blocks});
}

double ComputeTimeline::run(double start, double seconds) {
  // Holds that ended before this run cannot touch it or any later one.
  std::erase_if(active_, [&](const Hold& h) { return h.end <= start; });
  // Breakpoints after `start` where the held units change.
  std::vector<double> points;
  for (const Hold& h : active_) {
    if (h.start > start) points.push_back(h.start);
    points.push_back(h.end);
  }
  std::sort(points.begin(), points.end());
  double t = start, left = seconds;
  size_t next = 0;
  while (left > 0) {
    int held = 0;
    for (const Hold& h : active_) {
      if (h.start <= t && t < h.end) held += h.blocks;
    }
    const double rate = std::max(0.0, 1.0 - static_cast<double>(held) / units_);
    while (next < points.size() && points[next] <= t) ++next;
    const double segment_end = next < points.size() ? points[next] : -1;
    const double finish = rate > 0 ? t + left / rate : -1;
    // Time spent here beyond the work done is contention (none at full rate,
    // so nothing overlapping adds exactly zero).
    if (segment_end < 0 || (finish >= 0 && finish <= segment_end)) {
      // Finishes in this segment (the last segment has nothing held: rate 1).
      if (held > 0) {
        overlapped_ += finish - t;
        contention_ += (finish - t) - left;
      }
      t = finish;
      left = 0;
    } else {
      if (held > 0) {
        overlapped_ += segment_end - t;
        contention_ += (segment_end - t) * (1 - rate);
      }
      left -= (segment_end - t) * rate;
      t = segment_end;
    }
  }
  return t;
}

double ComputeTimeline::in_flight_seconds(double until) const {
  std::vector<Hold> sorted = holds_;
  std::sort(sorted.begin(), sorted.end(),
            [](const Hold& a, const Hold& b) { return a.start < b.start; });
  double total = 0, covered_to = 0;
  for (const Hold& h : sorted) {
    const double begin = std::max(h.start, covered_to), end = std::min(h.end, until);
    if (end > begin) total += end - begin;
    covered_to = std::max(covered_to, h.end);
  }
  return total;
}

}  // namespace llm
