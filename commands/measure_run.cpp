// Real runs under mpirun and their logged step times (see measure_run.h).
#include "commands/measure_run.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace llm {
namespace {

std::string shell_quote(const std::string& s) {
  std::string quoted = "'";
  for (char c : s) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string run_name(const std::string& config_path, const std::vector<std::string>& overrides,
                     int ranks) {
  std::string name =
      std::filesystem::path(config_path).stem().string() + "_np" + std::to_string(ranks);
  for (const std::string& o : overrides) {
    std::string v = o.substr(o.find('=') + 1);
    for (char& c : v) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
    }
    name += "_" + v;
  }
  return name;
}

}  // namespace

std::string default_work_dir() {
  return (std::filesystem::temp_directory_path() / "llm_scale_runs").string();
}

int run_command(const std::string& command) {
  // Containers and CI run as root, which mpirun refuses without these.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

namespace {

double measure_once(const std::string& config_path, const std::vector<std::string>& overrides,
                    int ranks, const MeasureOptions& options) {
  namespace fs = std::filesystem;
  const fs::path run_dir = fs::path(options.work_dir) / run_name(config_path, overrides, ranks);
  fs::remove_all(run_dir);
  fs::create_directories(run_dir);
  std::vector<std::string> all = overrides;
  for (std::string o :
       {fmt::format("training.steps={}", options.steps), std::string("training.stop_at_step=0"),
        std::string("training.eval_interval=0"), std::string("training.eval_sequences=0"),
        std::string("training.sample_tokens=0"), std::string("checkpoint.interval=0"),
        std::string("checkpoint.save_final=false"), std::string("checkpoint.resume=none"),
        "checkpoint.dir=" + run_dir.string(), std::string("logging.metrics=true"),
        std::string("logging.log_interval=1000")}) {
    all.push_back(o);
  }
  std::string command = fmt::format("{} -np {} {} --config {}", options.launcher, ranks,
                                    shell_quote(options.train_binary), shell_quote(config_path));
  for (const std::string& o : all) {
    command += ' ';
    command += shell_quote(fmt::format("--{}", o));
  }
  const fs::path log = run_dir / "run.log";
  command += fmt::format(" > {} 2>&1", shell_quote(log.string()));
  int status = run_command(command);
  LLM_CHECK(status == 0, "measuring {} on {} ranks failed (exit {}); see {}", config_path, ranks,
            status, log.string());

  std::ifstream metrics(run_dir / "metrics.jsonl");
  LLM_CHECK(metrics, "measuring {}: no metrics.jsonl in {}", config_path, run_dir.string());
  std::vector<double> seconds;
  std::string line;
  while (std::getline(metrics, line)) {
    nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || !record.contains("ms_per_step")) continue;
    if (record.value("step", 0) <= 1) continue;  // warm-up
    seconds.push_back(record["ms_per_step"].get<double>() / 1e3);
  }
  LLM_CHECK(!seconds.empty(), "measuring {}: no timed steps in {}/metrics.jsonl", config_path,
            run_dir.string());
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

double measure_step_seconds(const std::string& config_path,
                            const std::vector<std::string>& overrides, int ranks,
                            const MeasureOptions& options) {
  LLM_CHECK(options.steps >= 2, "measuring needs at least 2 steps (the first is warm-up)");
  LLM_CHECK(options.repeats >= 1, "measuring needs at least 1 run per point");
  double best = measure_once(config_path, overrides, ranks, options);
  for (int r = 1; r < options.repeats; ++r) {
    best = std::min(best, measure_once(config_path, overrides, ranks, options));
  }
  return best;
}

}  // namespace llm
