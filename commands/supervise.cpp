// The supervisor's loop: launch, read the ending, record, back off, relaunch
// (supervise.h).
#include "commands/supervise.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "persistence/run_directory.h"
#include "commands/failure_culprit.h"
#include "commands/host_pool.h"
#include "commands/launch_command.h"
#include "commands/restart_log.h"
#include "interop/hf_llama.h"
#include "base/child_process.h"
#include "base/error.h"
#include "base/exit_status.h"
#include "base/stop_signal.h"
#include "schema/config.h"
#include "trainer/launch_validate.h"
#include "trainer/trainer.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::system_clock;

constexpr size_t kOutputTailBytes = 256 * 1024;
constexpr double kLongestBackoffSeconds = 300;

// Why the config does not run on `world` ranks by the trainer's own rules
// for a world (launch_validate: the mesh, the batch, the memory plan against
// parallel.memory_per_rank); "" when it does.
std::string world_refusal(const Config& config, int world) {
  try {
    launch_validate(config, world, /*tokenizer=*/nullptr, /*warn=*/false);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// "hosta, hostb" (fmt::join trips a GCC 12 false warning).
std::string host_names(const std::vector<Host>& hosts) {
  std::string names;
  for (const Host& host : hosts) names += (names.empty() ? "" : ", ") + host.name;
  return names;
}

// One launch: the command line, and on a hostfile its hosts and world size.
struct Launch {
  std::vector<std::string> argv;
  std::vector<Host> hosts;
  int world_size = 0;
};

std::string utc_now() {
  const std::time_t now = Clock::to_time_t(Clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// When the checkpoint a relaunch resumes from was written (its meta.json).
std::optional<Clock::time_point> checkpoint_written(const std::string& step_dir) {
  struct stat meta {};
  if (stat((fs::path(step_dir) / "meta.json").c_str(), &meta) != 0) return std::nullopt;
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::seconds(meta.st_mtim.tv_sec) + std::chrono::nanoseconds(meta.st_mtim.tv_nsec)));
}

// Sleeps `seconds`, or less when a stop signal arrives (false then).
bool back_off(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (stop_signal_received()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return !stop_signal_received();
}

// ", rank 2 on hostb" for the log line; "" when the output named none.
std::string culprit_text(const FailureCulprit& culprit) {
  std::string text = culprit.rank >= 0 ? ", rank " + std::to_string(culprit.rank) : "";
  return culprit.host.empty() ? text : text + " on " + culprit.host;
}

// " on 2 rank(s), hosts set aside: hostb".
std::string hosts_text(const Launch& launch, const std::vector<std::string>& set_aside) {
  std::string names;
  for (const std::string& name : set_aside) names += (names.empty() ? "" : ", ") + name;
  return fmt::format(" on {} rank(s), hosts set aside: {}", launch.world_size,
                     names.empty() ? "none" : names);
}

class Supervisor {
 public:
  Supervisor(const std::vector<std::string>& launcher_argv, const SuperviseOptions& options)
      : options_(options), command_(launch_command_read(launcher_argv)) {
    config_ = config_load(command_.config, command_.overrides, hf_import_architecture);
    run_dir_ = options.run_dir.empty() ? config_.run_dir() : options.run_dir;
    if (!command_.hostfile.empty()) {
      const std::vector<Host> hosts = hostfile_read(command_.hostfile);
      full_world_ = command_.world_size > 0 ? command_.world_size : total_slots(hosts);
      pool_.emplace(hosts, options.set_aside_after, options.retry_after);
    }
  }

  int run() {
    Launch launch = next_launch();
    for (int restart = 1;; ++restart) {
      const Clock::time_point started = Clock::now();
      const ChildOutcome outcome = child_process_run(launch.argv, kOutputTailBytes);
      const JobEnding ending = classify_job_ending(outcome.wait_status);
      if (ending.finished) {
        spdlog::info("supervise: the job finished after {} restart(s) ({})", restart - 1,
                     (fs::path(run_dir_) / "restarts.jsonl").string());
        return kExitSuccess;
      }
      if (outcome.stop_signal != 0) {
        spdlog::warn("supervise: stopped by signal {}, passed on to the job; not restarted",
                     outcome.stop_signal);
        return ending.exit_status;
      }
      if (!ending.restartable) {
        spdlog::error("supervise: not restarted: the job ended with {}", ending.why);
        return ending.exit_status;
      }
      if (restart > options_.max_restarts) {
        spdlog::error(
            "supervise: gave up after {} restart(s) (--max-restarts): the job ended "
            "with {}",
            options_.max_restarts, ending.why);
        return ending.exit_status;
      }
      FailureCulprit culprit = failure_culprit(outcome.output_tail);
      if (culprit.host.empty() && culprit.rank >= 0)
        culprit.host = host_of_rank(launch.hosts, culprit.rank);
      if (pool_) pool_->record_failure(culprit.host);
      launch = next_launch();
      const RestartRecord record = restart_record(restart, ending, culprit, launch, started);
      restart_log_write(run_dir_, tensorboard_dir(config_), record);
      spdlog::warn(
          "supervise: restart {} of {} in {:.1f} s: {}{}; resuming from step {} ({:.1f} s "
          "lost){}",
          restart, options_.max_restarts, record.backoff_seconds, ending.why, culprit_text(culprit),
          record.resumed_from_step, record.time_lost_seconds,
          pool_ ? hosts_text(launch, record.hosts_set_aside) : "");
      if (!back_off(record.backoff_seconds)) return ending.exit_status;
    }
  }

 private:
  // The command as given; on a hostfile, the hosts not set aside, written to
  // <run dir>/hostfile, at the largest world size that fits on them.
  Launch next_launch() {
    Launch launch{command_.argv, {}, command_.world_size};
    if (!pool_) return launch;
    std::string refusal;  // why the largest world on the hosts last tried does not fit
    auto world_on = [&](const std::vector<Host>& hosts) {
      const int limit = std::min(full_world_, total_slots(hosts));
      const int world = largest_fitting_world(
          limit, [&](int world) { return world_refusal(config_, world).empty(); });
      if (world == 0)
        refusal = fmt::format("at {} rank(s) on {}: {}", limit, host_names(hosts),
                              world_refusal(config_, limit));
      return world;
    };
    launch.hosts = pool_->next_launch([&](const std::vector<Host>& hosts) {
      if (world_on(hosts) > 0) return true;
      spdlog::warn("supervise: a host that keeps failing is kept: without it no world fits ({})",
                   refusal);
      return false;
    });
    launch.world_size = world_on(launch.hosts);
    LLM_CHECK(launch.world_size > 0, "{}: no world size up to {} fits the hosts' {} slots ({})",
              command_.hostfile, full_world_, total_slots(launch.hosts), refusal);
    fs::create_directories(run_dir_);
    const std::string hostfile = (fs::path(run_dir_) / "hostfile").string();
    hostfile_write(hostfile, launch.hosts);
    launch.argv = launch_command_with_hosts(command_, launch.world_size, hostfile);
    return launch;
  }

  RestartRecord restart_record(int restart, const JobEnding& ending, const FailureCulprit& culprit,
                               const Launch& next, Clock::time_point started) const {
    RestartRecord record;
    record.restart = restart;
    record.time = utc_now();
    record.why = ending.why;
    record.error = culprit.error;
    record.exit_status = ending.exit_status;
    record.rank = culprit.rank;
    record.host = culprit.host;
    record.world_size = next.world_size;
    if (pool_) record.hosts_set_aside = pool_->set_aside();
    // The work since the checkpoint resumed from (or since the launch, when
    // that checkpoint is older) is done again.
    Clock::time_point redo_from = started;
    if (const std::string latest = checkpoint_latest(run_dir_); !latest.empty()) {
      record.resumed_from_step = checkpoint_step_of(fs::path(latest).filename().string());
      if (const auto written = checkpoint_written(latest))
        redo_from = std::max(redo_from, *written);
    }
    record.backoff_seconds =
        std::min(kLongestBackoffSeconds, options_.backoff.seconds * std::pow(2.0, restart - 1));
    record.time_lost_seconds = seconds_between(redo_from, Clock::now()) + record.backoff_seconds;
    return record;
  }

  SuperviseOptions options_;
  LaunchCommand command_;
  Config config_;
  std::string run_dir_;
  std::optional<HostPool> pool_;
  int full_world_ = 0;
};

}  // namespace

int supervise_command(const std::vector<std::string>& launcher_argv,
                      const SuperviseOptions& options) {
  stop_signal_install();
  return Supervisor(launcher_argv, options).run();
}

}  // namespace llm
