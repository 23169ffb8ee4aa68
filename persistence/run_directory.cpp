// A run directory's checkpoints (see run_directory.h).
#include "persistence/run_directory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "data/tokenizer.h"
#include "base/error.h"
#include "base/file_io.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

// Checkpoint steps in run_dir; an entry that looks like one but is not
// named step_<N> (say step_best/) is logged once per process and skipped.
std::vector<int> checkpoint_steps(const std::string& run_dir) {
  static std::set<std::string> logged;
  std::vector<int> steps;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) != 0 || !fs::exists(entry.path() / "meta.json")) continue;
    int step = checkpoint_step_of(name);
    if (step >= 0) {
      steps.push_back(step);
      continue;
    }
    if (logged.insert(entry.path().string()).second) {
      spdlog::warn("{}: not a step_<N> checkpoint; never pruned or resumed from",
                   entry.path().string());
    }
  }
  return steps;
}

}  // namespace

void checkpoint_prune(const std::string& run_dir, const CheckpointConfig& policy, int newest) {
  std::vector<int> steps = checkpoint_steps(run_dir);
  std::sort(steps.rbegin(), steps.rend());
  int kept = 0;
  for (int step : steps) {
    bool recent = policy.keep_last == 0 || kept < policy.keep_last || step == newest;
    bool milestone = policy.keep_every > 0 && step % policy.keep_every == 0;
    if (recent) ++kept;
    if (!recent && !milestone) fs::remove_all(fs::path(run_dir) / checkpoint_step_name(step));
  }
}

std::string checkpoint_step_name(int step) { return "step_" + std::to_string(step); }

int checkpoint_step_of(const std::string& name) {
  const std::string digits = name.rfind("step_", 0) == 0 ? name.substr(5) : "";
  if (digits.empty() || digits.size() > 9) return -1;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
  }
  return std::stoi(digits);
}

std::vector<std::string> checkpoint_remove_stale_temporaries(const std::string& run_dir) {
  std::vector<std::string> removed;
  if (!fs::is_directory(run_dir)) return removed;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    const std::string name = entry.path().filename().string();
    const bool interrupted_save = name.starts_with(".step_") && name.ends_with(".tmp");
    if (interrupted_save || name == "latest.tmp") removed.push_back(entry.path().string());
  }
  for (const std::string& path : removed) fs::remove_all(path);
  return removed;
}

std::string checkpoint_latest(const std::string& run_dir) {
  fs::path latest = fs::path(run_dir) / "latest";
  if (!fs::exists(latest)) return "";
  std::string name = read_file(latest.string());
  name.erase(name.find_last_not_of(" \n\r\t") + 1);
  // Only a step directory of this run: never a path elsewhere, nor a name the
  // filesystem would refuse (found by fuzz_checkpoint_meta).
  LLM_CHECK(checkpoint_step_of(name) >= 0, "{}: holds '{}', not the name of a step_N directory",
            latest.string(), name.substr(0, 64));
  fs::path dir = fs::path(run_dir) / name;
  LLM_CHECK(fs::exists(dir / "meta.json"), "{}: names {}, which has no meta.json", latest.string(),
            dir.string());
  return dir.string();
}

std::string checkpoint_step_directory(const std::string& path, const std::string& command) {
  if (fs::exists(fs::path(path) / "meta.json")) return path;
  const std::string latest = fs::is_directory(path) ? checkpoint_latest(path) : "";
  LLM_CHECK(!latest.empty(),
            "{}: {} is neither a checkpoint (no meta.json) nor a run directory with a 'latest' "
            "checkpoint",
            command, path);
  return latest;
}

std::string checkpoint_tokenizer(const std::string& step_dir, const Config& run,
                                 const std::string& command) {
  LLM_CHECK(!run.data.tokenizer.empty(), "{}: the run of {} had no data.tokenizer", command,
            step_dir);
  const std::string copy = run_tokenizer_dir(fs::path(step_dir).parent_path().string());
  if (fs::is_directory(copy)) return copy;
  LLM_CHECK(fs::exists(run.data.tokenizer),
            "{}: the run of {} kept no copy of its tokenizer, and its data.tokenizer {} is not "
            "there (run this from the directory the run was started in)",
            command, step_dir, run.data.tokenizer);
  return run.data.tokenizer;
}

}  // namespace llm
