// Logging: human lines through spdlog (rank 0 only at info level), and the
// machine-readable metrics file <run dir>/metrics.jsonl, one JSON object per
// line, whose records also go to any MetricsSink (TensorBoard). Invariants:
// metrics lines are flushed as written, so a killed run keeps every line it
// logged, and a failed write (a full disk) is an error naming the file; a
// resumed run holds one line per step (the lines of steps it re-runs are
// dropped when it opens); keys are stable (tools read them).
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace llm {

// Sets the log pattern; ranks other than 0 only print warnings and errors.
void log_setup(int rank);

// Another destination of the metrics records, handed each one as written.
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  virtual void write(const nlohmann::json& record) = 0;
};

class MetricsLog {
 public:
  MetricsLog() = default;
  // Opens `path` (none when empty) for a run starting at `start_step`,
  // creating its directory: at 0 the file starts empty; otherwise (a resume)
  // it keeps the lines whose "step" is at most start_step, drops the rest and
  // a cut-off last line, and appends {"event": "resumed", "step": start_step}
  // (which the sinks receive too).
  MetricsLog(const std::string& path, int start_step,
             std::vector<std::unique_ptr<MetricsSink>> sinks = {});
  // Writes one line and flushes, then hands the record to each sink; throws
  // naming the file if either fails.
  void write(const nlohmann::json& record);
  // Whether records go anywhere (the file or a sink).
  bool is_open() const { return out_.is_open() || !sinks_.empty(); }

 private:
  std::string path_;
  std::ofstream out_;
  std::vector<std::unique_ptr<MetricsSink>> sinks_;
};

// "1h02m", "3m05s", "42s"
std::string format_duration(double seconds);
// A count with an SI prefix and a unit: (1234567, "FLOP") -> "1.23 MFLOP";
// without a unit (1234567, "") -> "1.23M".
std::string format_si(double value, const char* unit);

}  // namespace llm
