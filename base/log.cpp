// spdlog set-up and the JSON-lines metrics writer.
#include "base/log.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "base/error.h"
#include "base/file_io.h"

namespace llm {

void log_setup(int rank) {
  spdlog::set_pattern("[%H:%M:%S] %v");
  spdlog::set_level(rank == 0 ? spdlog::level::info : spdlog::level::warn);
}

namespace {

// The complete lines of `text` whose step (absent: kept) is at most `step`.
std::string lines_up_to_step(const std::string& text, int step) {
  std::string kept, line;
  std::istringstream lines(text);
  while (std::getline(lines, line)) {
    if (lines.eof()) break;  // no newline: cut off by a crash
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool later = record.is_object() && record.contains("step") &&
                       record["step"].is_number() && record["step"].get<double>() > step;
    if (!later) kept += line + '\n';
  }
  return kept;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, int start_step,
                       std::vector<std::unique_ptr<MetricsSink>> sinks)
    : path_(path), sinks_(std::move(sinks)) {
  if (!path.empty()) {
    std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    const bool resumed = start_step > 0 && std::filesystem::is_regular_file(p);
    if (resumed) write_file_atomically(path, lines_up_to_step(read_file(path), start_step));
    out_.open(path, resumed ? std::ios::app : std::ios::trunc);
    LLM_CHECK(out_.is_open(), "{}: cannot open the metrics file for writing: {}", path,
              std::strerror(errno));
  }
  if (start_step > 0) write({{"event", "resumed"}, {"step", start_step}});
}

void MetricsLog::write(const nlohmann::json& record) {
  if (out_.is_open()) {
    out_ << record.dump() << '\n';
    out_.flush();
    LLM_CHECK(out_.good(), "{}: cannot write the metrics file (disk full?): {}", path_,
              std::strerror(errno));
  }
  for (const std::unique_ptr<MetricsSink>& sink : sinks_) sink->write(record);
}

std::string format_duration(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_si(double value, const char* unit) {
  static const char* const prefixes[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (std::abs(value) >= 1000 && p < 5) {
    value /= 1000;
    ++p;
  }
  const int decimals = p == 0 ? 0 : (std::abs(value) < 10 ? 2 : 1);
  if (*unit == '\0') return fmt::format("{:.{}f}{}", value, decimals, prefixes[p]);
  return fmt::format("{:.{}f} {}{}", value, decimals, prefixes[p], unit);
}

}  // namespace llm
