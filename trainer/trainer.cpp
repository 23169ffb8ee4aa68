// The training loop behind `./train`.
#include "trainer/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "base/file_io.h"
#include "device/memory_usage.h"
#include "base/stop_signal.h"
#include "base/system.h"
#include "data/targets.h"
#include "tensorboard/metrics_events.h"
#include "data/tokenizer.h"
#include "model/flops.h"
#include "model/generate.h"
#include "parallel/pipeline_schedule.h"
#include "base/cli_values.h"
#include "base/fault_hooks.h"
#include "collectives/watchdog.h"
#include "persistence/background_save.h"
#include "persistence/checkpoint.h"
#include "persistence/run_directory.h"
#include "parallel/collective_agreement.h"
#include "parallel/comm.h"
#include "model/kernels/cpu_gemm_rate.h"
#include "parallel/device_group.h"
#include "trainer/launch_validate.h"
#include "trainer/save_log.h"
#include "trainer/step_log.h"
#include "trainer/step_progress.h"

namespace llm {

std::string tensorboard_dir(const Config& config) {
  if (!config.logging.tensorboard.on) return "";
  const std::string& named = config.logging.tensorboard.path;
  return named.empty() ? (std::filesystem::path(config.run_dir()) / "tensorboard").string() : named;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// data.tokenizer, when the config names one.
std::optional<Tokenizer> load_tokenizer(const Config& config) {
  if (config.data.tokenizer.empty()) return std::nullopt;
  return Tokenizer::load(config.data.tokenizer);
}

// Where the metrics records go: <run dir>/metrics.jsonl and TensorBoard's
// event files (in <run dir>/tensorboard or the directory logging.tensorboard
// names), each when configured.
MetricsLog open_metrics(Config& config, int start_step) {
  const std::string run_dir = config.run_dir();
  std::vector<std::unique_ptr<MetricsSink>> sinks;
  if (const std::string dir = tensorboard_dir(config); !dir.empty()) {
    auto tensorboard =
        std::make_unique<TensorBoardMetrics>(dir, config_to_toml(config), start_step);
    spdlog::info("TensorBoard events in {} (view: tensorboard --logdir {})", tensorboard->path(),
                 config.logging.tensorboard.path.empty() ? run_dir : dir);
    sinks.push_back(std::move(tensorboard));
  }
  return MetricsLog(config.logging.metrics ? run_dir + "/metrics.jsonl" : "", start_step,
                    std::move(sinks));
}

// The test hook of docs/testing.md: LLM_FAULT_SLOW_STEP_MS=R:MS makes world
// rank R compute MS milliseconds longer each step, a straggler for the
// straggler report to find.
void slow_step_for_tests(int world_rank) {
  static const RankFault slow = rank_fault_from_env("LLM_FAULT_SLOW_STEP_MS");
  if (slow.rank == world_rank) std::this_thread::sleep_for(std::chrono::milliseconds(slow.value));
}

// Free host memory per rank of this node, for a background save's copy. The
// test hook of docs/testing.md: LLM_FAULT_HOST_MEMORY_FREE=R:BYTES makes
// world rank R see BYTES free (read at each call, so a test may set it).
size_t host_memory_free_per_rank(int world_rank) {
  const RankFault fake = rank_fault_from_env("LLM_FAULT_HOST_MEMORY_FREE");
  if (fake.rank == world_rank) return static_cast<size_t>(fake.value);
  return memory_available_bytes() / static_cast<size_t>(std::max(comm_local_size(), 1));
}

}  // namespace

Trainer::Trainer(Config config, Group& world, const Backend* backend_override)
    : config_(std::move(config)),
      tokenizer_(load_tokenizer(config_)),
      host_world_(world),
      // Everything the run reads is checked before step 1, not after hours.
      device_world_(
          device_group(launch_validate(config_, world.size(), tokenizer_ ? &*tokenizer_ : nullptr,
                                       world.rank() == 0),
                       world)),
      topology_(device_world_ ? *device_world_ : world, config_.parallel),
      accumulation_steps_(micro_batches_per_step(config_.training, topology_.dp_size())),
      spike_guard_(config_.training.spike_loss_factor, config_.training.spike_grad_norm_factor,
                   config_.training.spike_window) {
  const TrainingConfig& t = config_.training;
  // No recorder file yet: the run directory is written once run() starts, so
  // bad input found here (data, tokenizer, a plan that does not fit) leaves
  // nothing behind.
  watchdog_configure({parse_duration_seconds(config_.parallel.timeout, "parallel.timeout"), "",
                      static_cast<size_t>(config_.parallel.flight_recorder_entries)});
  check_memory_fits(config_, topology_.plan, rank_memory_available(config_, comm_local_size()));
  train_data_ =
      std::make_unique<DataLoader>(config_.data.train, t.seq_len, config_.model.vocab_size,
                                   static_cast<uint64_t>(t.seed), /*shuffle=*/true);
  if (!config_.data.val.empty() && t.eval_sequences > 0) {
    val_data_ = std::make_unique<DataLoader>(config_.data.val, t.seq_len, config_.model.vocab_size,
                                             static_cast<uint64_t>(t.seed), /*shuffle=*/false);
  }
  const Backend& backend = backend_override
                               ? *backend_override
                               : backend_for(config_.device(), config_.training.attention);
  LLM_CHECK(backend.device == config_.device(),
            "{}: the trainer was given a backend of another device than training.device",
            config_.path);
  const int stages = topology_.pipeline->size(), stage = topology_.pipeline->rank();
  model_ = Transformer::create(config_.model, t.micro_batch_size, t.seq_len, backend,
                               recompute_plan(t), config_.precision(),
                               ModelSplit{topology_.tensor.get(), topology_.pipeline.get(),
                                          pipeline_in_flight(config_.parallel.pipeline_schedule,
                                                             stages, stage, accumulation_steps_)},
                               t.loss_chunk_tokens);
  if (t.cuda_graphs && !backend.graphs)
    spdlog::warn(
        "training.cuda_graphs is ignored: the op profile times every kernel, launched eagerly");
  model_->set_device_graphs(t.cuda_graphs && backend.graphs);
  model_->set_fp8_forward_accumulation(t.fp8_fast_accum ? Fp8Accumulation::fast
                                                        : Fp8Accumulation::promoted);
  if (t.fp8_scaling == Fp8Scaling::delayed)
    fp8_history_.emplace(t.fp8_amax_history, static_cast<size_t>(model_->fp8_delayed_inputs()));
  if (config_.data.document_masking) {
    // Documents start at the tokenizer's BOS, which prepare writes first in
    // each, or after its EOS where it has no BOS.
    const DocumentBoundary boundary = tokenizer_->document_boundary();
    model_->set_document_masking(boundary, config_.data.resets_positions());
    train_data_->set_document_boundary(boundary);
    if (val_data_) val_data_->set_document_boundary(boundary);
  }
  engine_ = std::make_unique<ShardingEngine>(model_->layout(), config_, backend, topology_);
  engine_->set_steps_per_epoch(
      static_cast<int>(std::max<int64_t>(1, train_data_->num_samples() / t.batch_size)));
  inputs_.resize(static_cast<size_t>(t.micro_batch_size) * t.seq_len);
  targets_.resize(inputs_.size());
  restore_state();
}

Trainer::~Trainer() = default;

double Trainer::peak_flops_per_rank() const {
  if (config_.logging.peak_tflops > 0) return config_.logging.peak_tflops * 1e12;
  if (config_.device() == Device::cuda) return 0;  // unknown: no MFU
  // Every rank measures at once, so each sees its share of the machine.
  return measure_gemm_gflops(1024, 2) * 1e9;
}

void Trainer::claim_run_dir() {
  const std::string run_dir = config_.run_dir();
  std::filesystem::create_directories(run_dir);
  run_dir_lock_ = std::make_unique<FileLock>((std::filesystem::path(run_dir) / ".lock").string(),
                                             "run directory " + run_dir);
  for (const std::string& stale : checkpoint_remove_stale_temporaries(run_dir)) {
    spdlog::info("removed {}, left by an interrupted save", stale);
  }
}

void Trainer::check_save_step(int steps_done) const {
  LLM_CHECK(steps_done == state_step_,
            "{}: refusing to save the state after step {} as step_{}: its name would not match "
            "its weights",
            config_.run_dir(), state_step_, steps_done);
}

TrainerState Trainer::trainer_state() const {
  return {fp8_history_ ? fp8_history_->steps() : std::vector<std::vector<float>>{}};
}

std::string Trainer::save_checkpoint(int steps_done) {
  check_save_step(steps_done);
  return checkpoint_save(config_.run_dir(), steps_done, config_, *engine_, topology_,
                         trainer_state());
}

std::unique_ptr<BackgroundSaver> Trainer::background_saver() {
  if (!config_.checkpoint.async) return nullptr;
  // Every rank saves the same way, or their collectives would differ.
  const size_t copy = background_save_host_bytes(*engine_, topology_);
  const size_t free = host_memory_free_per_rank(topology_.world.rank());
  const bool fits = free == 0 || copy <= free;
  if (topology_.world.all_reduce_sum(fits ? 0.0 : 1.0) > 0) {
    if (!fits)
      spdlog::warn(
          "checkpoint.async: rank {} would need {} of host memory to copy its state aside, "
          "{} is free per rank; saving blocking",
          topology_.world.rank(), format_bytes(copy), format_bytes(free));
    return nullptr;
  }
  return std::make_unique<BackgroundSaver>(*engine_, topology_);
}

StepResult Trainer::train_step(int step, bool show_progress) {
  const TrainingConfig& t = config_.training;
  const int mb = t.micro_batch_size;
  // The loss is the mean over the global batch's kept targets: every rank
  // counts them from the data (a pure function of the step), so each
  // micro-batch's gradient is scaled alike on every rank, before any
  // collective. A batch that keeps none trains on nothing (zero gradients).
  const int64_t kept =
      train_data_->kept_targets(static_cast<int64_t>(step) * t.batch_size, t.batch_size);
  const float dloss = 1.0f / static_cast<float>(std::max<int64_t>(kept, 1));
  const int dp = topology_.dp_size();
  // Delayed scaling: the whole step's FP8 input scales from the history.
  if (fp8_history_) model_->begin_fp8_delayed_step(fp8_history_->max());
  engine_->zero_grads();
  StepProgress progress(*engine_, model_->layout(), fmt::format("step {}/{}", step + 1, t.steps),
                        accumulation_steps_, t.recompute == Recompute::full,
                        show_progress && topology_.world.rank() == 0);
  // Micro-batch `micro` of every data-parallel rank, side by side, then the
  // next: the step's sequences are the same whatever the world size. Only the
  // first pipeline stage (inputs) and the last (targets) read them.
  const ModelSlice& slice = model_->layout().slice;
  // With document masking every stage reads the inputs (its attention needs
  // the documents).
  const bool reads_tokens =
      slice.first_stage() || slice.last_stage() || config_.data.document_masking;
  auto tokens = [&](int micro) {
    progress.forward(micro);
    if (!reads_tokens) return MicroBatchTokens{nullptr, nullptr};
    int64_t position = static_cast<int64_t>(step) * t.batch_size +
                       (static_cast<int64_t>(micro) * dp + topology_.dp_rank()) * mb;
    train_data_->read(position, mb, inputs_.data(), targets_.data());
    return MicroBatchTokens{inputs_.data(), targets_.data()};
  };
  auto before_backward = [&](int micro) {
    progress.backward(micro);
    engine_->begin_micro_batch(micro == accumulation_steps_ - 1);
  };
  const PipelineStepResult run =
      pipeline_step(config_.parallel.pipeline_schedule, *model_, progress, accumulation_steps_, mb,
                    t.seq_len, dloss, tokens, before_backward);
  StepResult result;
  result.pipeline_wait_seconds = run.wait_seconds;
  // The last stage computes the losses; the ranks of a tensor group compute
  // the same ones, data-parallel ranks distinct ones.
  double loss_sum = run.loss_sum;
  if (topology_.pipeline->size() > 1) loss_sum = topology_.pipeline->all_reduce_sum(loss_sum);
  // Each micro-batch's loss is its kept losses' sum over its B * T targets:
  // their mean over the micro-batches and ranks, times the fraction of targets
  // kept (exactly 1 without masks, so those runs keep their bits).
  const double all_targets = static_cast<double>(t.batch_size) * t.seq_len;
  result.loss = static_cast<float>(topology_.data->all_reduce_sum(loss_sum) /
                                   (static_cast<double>(accumulation_steps_) * dp) *
                                   (all_targets / static_cast<double>(std::max<int64_t>(kept, 1))));
  result.kept_targets = kept;
  // Every rank's step amaxes (each block's from the ranks that hold it) into
  // the history, skipped step or not: the forward passes ran.
  if (fp8_history_) fp8_history_->push(fp8_amax_world_max(host_world_, model_->fp8_step_amax()));
  result.grad_norm = engine_->grad_norm();
  LLM_CHECK(std::isfinite(result.loss) && std::isfinite(result.grad_norm),
            "step {}: loss {} / gradient norm {} is not finite (lower training.lr?)", step + 1,
            result.loss, result.grad_norm);
  result.lr = lr_at_step(t, step);
  // The loss and the norm are the same on every rank, so is the verdict. A
  // skipped step still consumes its data and its schedule position.
  result.skipped = spike_guard_.check(result.loss, result.grad_norm);
  // The step's collectives, compared between the members of each group
  // before they can change the weights (NCCL does not compare sizes).
  check_collective_agreement(comm_world());
  if (!result.skipped) {
    // A save's copies of the state this update overwrites come first.
    if (saver_) saver_->before_update();
    engine_->optimizer_step(
        {result.lr, clip_scale(result.grad_norm, static_cast<float>(t.grad_clip)), step + 1});
  }
  state_step_ = step + 1;
  return result;
}

float Trainer::evaluate() {
  if (!val_data_) return NAN;
  const TrainingConfig& t = config_.training;
  const int total = static_cast<int>(std::min<int64_t>(t.eval_sequences, val_data_->num_samples()));
  double loss_sum = 0;
  int64_t kept = 0;
  for (int done = 0; done < total;) {
    int count = std::min(t.micro_batch_size, total - done);
    val_data_->read(done, count, inputs_.data(), targets_.data());
    kept += std::count_if(targets_.begin(), targets_.begin() + count * t.seq_len,
                          [](int32_t target) { return target != kIgnoredTarget; });
    loss_sum += static_cast<double>(
                    model_->forward(*engine_, inputs_.data(), targets_.data(), count, t.seq_len)) *
                count;
    done += count;
  }
  // forward() divides by all B * T targets: rescale to the kept ones (a
  // factor of exactly 1 without masks).
  const double all_targets = static_cast<double>(total) * t.seq_len;
  return static_cast<float>(loss_sum / total *
                            (all_targets / static_cast<double>(std::max<int64_t>(kept, 1))));
}

std::string Trainer::sample(int tokens) {
  LLM_CHECK(tokenizer_.has_value(), "{}: sampling needs data.tokenizer", config_.path);
  const Tokenizer& tokenizer = *tokenizer_;
  SamplingOptions options;
  options.max_new_tokens = tokens;
  options.seed = static_cast<uint64_t>(config_.training.seed);
  model_->reserve_kv_cache(1, config_.training.seq_len);
  // The token a document follows: its BOS, or the EOS ending the one before.
  const DocumentBoundary boundary = tokenizer.document_boundary();
  return tokenizer.decode(generate(*model_, *engine_, {boundary.token}, 1, options).front());
}

void Trainer::run() {
  const TrainingConfig& t = config_.training;
  const std::string run_dir = config_.run_dir();
  const bool leader = topology_.world.rank() == 0;
  if (leader) {
    claim_run_dir();
    write_file_atomically((std::filesystem::path(run_dir) / "config.toml").string(),
                          config_to_toml(config_));
    // generate and export read this copy: the run directory stands alone.
    if (tokenizer_) tokenizer_->save_copy(run_tokenizer_dir(run_dir));
    metrics_ = open_metrics(config_, start_step_);
  }
  watchdog_set_dump_dir(run_dir);
  stop_signal_install();
  const int stop_at = t.stop_at_step > 0 ? std::min(t.stop_at_step, t.steps) : t.steps;
  if (!resumed_from_.empty()) {
    spdlog::info("resumed from {} at step {} (loaded in {:.2f} s); config {}", resumed_from_,
                 start_step_, load_seconds_,
                 resumed_changes_ == 0
                     ? std::string("unchanged")
                     : fmt::format("changed in {} setting(s), listed above", resumed_changes_));
    if (start_step_ >= stop_at) {
      spdlog::info(
          "{} is already trained to step {} of {}: nothing to do (raise training.steps "
          "to train further, or pass --checkpoint.resume=none to start afresh)",
          run_dir, start_step_, t.steps);
      return;
    }
  }

  const StateBytes state = engine_->bytes();
  const size_t activations = model_->activation_bytes().total;
  log_run_start(state, activations);

  auto log_eval = [&](int step) {
    float val_loss = evaluate();
    if (std::isnan(val_loss)) return;
    spdlog::info("step {:>5}/{} | val loss {:.4f}", step, t.steps, val_loss);
    if (metrics_.is_open()) metrics_.write({{"step", step}, {"val_loss", val_loss}});
  };

  if (resumed_from_.empty()) log_eval(0);
  const CheckpointConfig& policy = config_.checkpoint;
  auto run_start = Clock::now();
  int last_saved = resumed_from_.empty() ? -1 : start_step_;
  saver_ = background_saver();
  auto save = [&](int done) {
    last_saved = done;
    if (saver_) {
      check_save_step(done);
      if (auto previous = saver_->start(run_dir, done, config_, trainer_state()))
        log_save_completed(*previous, /*background=*/true, metrics_);
      log_save_started(*saver_);
      return;
    }
    auto start = Clock::now();
    std::string dir = save_checkpoint(done);
    const double seconds = seconds_since(start);
    log_save_completed({done, dir, seconds, 0, seconds}, /*background=*/false, metrics_);
  };
  // The save in flight, waited for: a run ends only once `latest` names it.
  auto finish_saves = [&] {
    if (!saver_) return;
    if (auto report = saver_->finish()) log_save_completed(*report, /*background=*/true, metrics_);
  };
  // The arenas' bytes on the device (on the CPU the offloaded optimizer's
  // host memory is the same memory).
  const StepLogRun log_run{.start_step = start_step_,
                           .peak_flops_per_rank = peak_flops_per_rank(),
                           .pipeline_stages = topology_.pipeline->size(),
                           .drops_targets = train_data_->drops_targets(),
                           .train_samples = train_data_->num_samples(),
                           .device_bytes = state.total() + activations +
                                           (config_.device() == Device::cpu ? state.host : 0)};
  StepLog step_log(config_, log_run, host_world_, metrics_);  // its floats are on the host
  for (int step = start_step_; step < stop_at; ++step) {
    auto step_start = Clock::now();
    const double waited_before = watchdog_total_wait_seconds();
    slow_step_for_tests(topology_.world.rank());
    const StepResult r = train_step(step, /*show_progress=*/true);
    step_log.record(step, r, seconds_since(step_start),
                    watchdog_total_wait_seconds() - waited_before);
    const int done = step + 1;
    bool last = done == t.steps;
    if ((t.eval_interval > 0 && done % t.eval_interval == 0) || last) log_eval(done);
    if (saver_) {
      if (auto report = saver_->poll()) log_save_completed(*report, /*background=*/true, metrics_);
    }
    if (policy.interval > 0 && done % policy.interval == 0) save(done);
    // Every rank learns of a signal that reached any of them, at the same step.
    if (topology_.world.all_reduce_sum(stop_signal_received() ? 1.0 : 0.0) > 0) {
      if (policy.save_final && last_saved != done) save(done);
      finish_saves();
      spdlog::warn("stopped by a signal after step {}", done);
      return;
    }
  }
  if (policy.save_final && last_saved != stop_at) save(stop_at);
  finish_saves();
  spdlog::info("trained steps {}..{} in {}; peak resident memory {}", start_step_, stop_at,
               format_duration(seconds_since(run_start)), format_bytes(peak_resident_bytes()));
  if (stop_at < t.steps) {
    spdlog::info("stopped at step {} of {} (training.stop_at_step); run again to continue", stop_at,
                 t.steps);
    return;
  }
  if (t.sample_tokens > 0) {
    spdlog::info("sample:\n{}", sample(t.sample_tokens));
  }
}

}  // namespace llm
