// restarts.jsonl and the restarts' TensorBoard scalars (restart_log.h).
#include "commands/restart_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_io.h"
#include "tensorboard/event_writer.h"
#include "tensorboard/metrics_events.h"

namespace llm {
namespace {

nlohmann::json record_json(const RestartRecord& record) {
  nlohmann::json json = {{"event", "restart"},
                         {"restart", record.restart},
                         {"time", record.time},
                         {"why", record.why},
                         {"exit_status", record.exit_status},
                         {"step", record.resumed_from_step},
                         {"time_lost_seconds", record.time_lost_seconds},
                         {"backoff_seconds", record.backoff_seconds}};
  if (!record.error.empty()) json["error"] = record.error;
  if (record.rank >= 0) json["rank"] = record.rank;
  if (!record.host.empty()) json["host"] = record.host;
  if (record.world_size > 0) json["world_size"] = record.world_size;
  if (!record.hosts_set_aside.empty()) json["hosts_set_aside"] = record.hosts_set_aside;
  return json;
}

}  // namespace

std::string restart_record_json(const RestartRecord& record) { return record_json(record).dump(); }

void restart_log_write(const std::string& run_dir, const std::string& tensorboard_dir,
                       const RestartRecord& record) {
  std::filesystem::create_directories(run_dir);
  const std::string path = (std::filesystem::path(run_dir) / "restarts.jsonl").string();
  const std::string line = restart_record_json(record) + "\n";
  FileDescriptor file(path, O_WRONLY | O_CREAT | O_APPEND);
  LLM_CHECK(write(file.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                fsync(file.get()) == 0,
            "{}: cannot append a restart: {}", path, std::strerror(errno));
  if (tensorboard_dir.empty()) return;
  const nlohmann::json json = record_json(record);
  EventFileWriter(tensorboard_dir)
      .write_scalars(record.resumed_from_step, metrics_record_scalars(json));
}

}  // namespace llm
