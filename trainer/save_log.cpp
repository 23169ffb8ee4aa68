// The lines and records of checkpoint saves (see save_log.h).
#include "trainer/save_log.h"

#include <spdlog/spdlog.h>

namespace llm {

void log_save_started(const BackgroundSaver& saver) {
  const double waited = saver.waited_seconds();
  spdlog::info(
      "saving step_{} in the background; the step loop stalled {:.3f} s{}", saver.started_step(),
      saver.stall_seconds(),
      waited >= 0.001 ? fmt::format(" ({:.3f} s waiting for the save before)", waited) : "");
}

void log_save_completed(const SaveReport& report, bool background, MetricsLog& metrics) {
  if (background) {
    spdlog::info("saved {} in {:.2f} s in the background; the step loop stalled {:.3f} s",
                 report.dir, report.write_seconds, report.stall_seconds);
  } else {
    spdlog::info("saved {} in {:.2f} s", report.dir, report.write_seconds);
  }
  if (!metrics.is_open()) return;
  metrics.write({{"event", "checkpoint"},
                 {"step", report.step},
                 {"stall_seconds", report.stall_seconds},
                 {"waited_seconds", report.waited_seconds},
                 {"write_seconds", report.write_seconds},
                 {"background", background}});
}

}  // namespace llm
