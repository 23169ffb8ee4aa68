// The per-step log line and metrics record (see step_log.h).
#include "trainer/step_log.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "model/flops.h"
#include "base/system.h"

namespace llm {

StepLog::StepLog(const Config& config, const StepLogRun& run, Group& world, MetricsLog& metrics)
    : config_(config),
      run_(run),
      metrics_(metrics),
      tokens_per_step_(static_cast<double>(config.training.batch_size) * config.training.seq_len),
      meter_(step_flops(config).total(), tokens_per_step_, world.size(), run.peak_flops_per_rank),
      memory_(config.device(), run.device_bytes),
      stragglers_(world) {}

void StepLog::record(int step, const StepResult& r, double seconds, double waited_seconds) {
  const TrainingConfig& t = config_.training;
  const int done = step + 1;
  meter_.add(r.loss, seconds, r.pipeline_wait_seconds);
  stragglers_.add(seconds, waited_seconds);
  const MemoryUsage mem = memory_.sample();
  const double tokens_seen = tokens_per_step_ * done;
  const double epochs = static_cast<double>(done) * t.batch_size /
                        static_cast<double>(std::max<int64_t>(1, run_.train_samples));
  StragglerReport slowest;  // filled at a log line
  if (done % config_.logging.log_interval == 0 || done == t.steps) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const double eta = elapsed / (done - run_.start_step) * (t.steps - done);
    const StepInterval i = meter_.take();
    std::string extra = fmt::format(" | {}/s per rank", format_si(i.flops_per_rank, "FLOP"));
    if (!std::isnan(i.mfu)) extra += fmt::format(", MFU {:.1f}%", 100 * i.mfu);
    if (run_.pipeline_stages > 1)
      extra += fmt::format(" | pipeline wait {:.0f}%", 100 * i.pipeline_wait);
    if (run_.drops_targets) {
      extra += fmt::format(" | targets kept {} ({:.1f}%)", r.kept_targets,
                           100 * static_cast<double>(r.kept_targets) / tokens_per_step_);
    }
    slowest = stragglers_.take();
    if (slowest.ranks > 1) {
      extra += fmt::format(" | slowest rank {} +{:.1f} ms/step ({:.0f}%)", slowest.rank,
                           slowest.behind_ms, 100 * slowest.behind_fraction);
    }
    spdlog::info(
        "step {:>5}/{} | loss {:.4f}{} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | "
        "{:.1f} ms/step{} | mem {} alloc / {} resv / {} peak | {} tokens, {:.2f} "
        "epochs | ETA {}",
        done, t.steps, i.mean_loss,
        i.steps > 1 ? fmt::format(" (mean of {})", i.steps) : std::string(), r.lr, r.grad_norm,
        i.tokens_per_s, i.ms_per_step, extra, format_bytes(static_cast<double>(mem.allocated)),
        format_bytes(static_cast<double>(mem.reserved)),
        format_bytes(static_cast<double>(mem.peak)), format_si(tokens_seen, ""), epochs,
        format_duration(eta));
  }
  if (r.skipped) {
    spdlog::warn("step {} | update skipped by the spike guard: {}", done, r.skipped->reason);
    if (metrics_.is_open()) {
      metrics_.write({{"step", done},
                      {"event", "spike_skipped"},
                      {"loss", r.loss},
                      {"grad_norm", r.grad_norm},
                      {"median_loss", r.skipped->median_loss},
                      {"median_grad_norm", r.skipped->median_grad_norm},
                      {"reason", r.skipped->reason}});
    }
  }
  if (!metrics_.is_open()) return;
  const double flops = meter_.flops_per_rank(1, seconds);
  nlohmann::json record = {{"step", done},
                           {"loss", r.loss},
                           {"lr", r.lr},
                           {"grad_norm", r.grad_norm},
                           {"tokens_per_s", tokens_per_step_ / seconds},
                           {"ms_per_step", seconds * 1e3},
                           {"tokens_seen", tokens_seen},
                           {"epochs", epochs},
                           {"peak_rss_bytes", peak_resident_bytes()},
                           {"flops_per_rank", flops},
                           {"mem_allocated_bytes", mem.allocated},
                           {"mem_reserved_bytes", mem.reserved},
                           {"mem_peak_bytes", mem.peak}};
  if (const double mfu = meter_.mfu(flops); !std::isnan(mfu)) record["mfu"] = mfu;
  if (run_.drops_targets) record["kept_targets"] = r.kept_targets;
  if (slowest.ranks > 1) {  // the log interval's, on its last step
    record["slowest_rank"] = slowest.rank;
    record["slowest_busy_ms_per_step"] = slowest.busy_ms;
    record["slowest_behind_ms_per_step"] = slowest.behind_ms;
    record["rate_dispersion"] = slowest.rate_dispersion;
  }
  metrics_.write(record);
}

}  // namespace llm
