// Logging: human lines through spdlog (rank 0 only at info level), and the
// machine-readable metrics file <run dir>/metrics.jsonl, one JSON object per
// line. Invariant: metrics lines are flushed as written, so a killed run
// keeps every line it logged; keys are stable (tools read them).
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

namespace llm {

// Sets the log pattern; ranks other than 0 only print warnings and errors.
void log_setup(int rank);

class MetricsLog {
 public:
  MetricsLog() = default;
  // Opens `path` (truncating unless `append`); creates its directory.
  MetricsLog(const std::string& path, bool append);
  void write(const nlohmann::json& record);
  bool is_open() const { return out_.is_open(); }

 private:
  std::ofstream out_;
};

// "1h02m", "3m05s", "42s"
std::string format_duration(double seconds);

}  // namespace llm
