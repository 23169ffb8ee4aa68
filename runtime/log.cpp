// spdlog set-up and the JSON-lines metrics writer.
#include "runtime/log.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "runtime/error.h"

namespace llm {

void log_setup(int rank) {
  spdlog::set_pattern("[%H:%M:%S] %v");
  spdlog::set_level(rank == 0 ? spdlog::level::info : spdlog::level::warn);
}

MetricsLog::MetricsLog(const std::string& path, bool append) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  LLM_CHECK(out_.is_open(), "{}: cannot open the metrics file for writing", path);
}

void MetricsLog::write(const nlohmann::json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
}

std::string format_duration(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace llm
