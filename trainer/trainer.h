// The training loop: data -> micro-batches -> forward/backward -> gradient
// clipping -> AdamW, with evaluation, logging, metrics and a final sample, on
// the device training.device names (one GPU per rank, by node-local rank).
// Invariant: the sequences of optimizer step s are stream positions
// [s * batch_size, (s + 1) * batch_size) of the training loader, so a run's
// data order depends only on (seed, step), never on timing.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "schema/config.h"
#include "base/file_io.h"
#include "base/log.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "model/transformer.h"
#include "parallel/comm.h"
#include "parallel/sharding_engine.h"
#include "parallel/topology.h"
#include "cost_models/memory_plan.h"
#include "trainer/fp8_amax_history.h"
#include "trainer/spike_guard.h"
#include "trainer/step_result.h"

namespace llm {

class BackgroundSaver;  // persistence/background_save.h
struct TrainerState;    // persistence/checkpoint.h

// Where a run's TensorBoard event files go: logging.tensorboard's directory,
// else <run dir>/tensorboard; "" when it is off.
std::string tensorboard_dir(const Config& config);

class Trainer {
 public:
  // Trains over `world` (every rank of it calls this together), on the ops of
  // `backend` when given (it must run on training.device and outlive the
  // trainer: `./train bench --profile` passes a profiled one), else of
  // backend_for(training.device, training.attention).
  Trainer(Config config, Group& world, const Backend* backend = nullptr);
  ~Trainer();

  // Runs from start_step() to training.steps with evaluation, logging and
  // checkpoints; then the sample. Returns early (after saving) on SIGTERM, SIGINT,
  // SIGUSR1 or SIGUSR2 (base/stop_signal.h).
  void run();
  // Optimizer steps already done: the resumed checkpoint's step, else 0.
  int start_step() const { return start_step_; }
  // Collective: saves the state after `steps_done` steps; returns its
  // directory. Throws unless the state is after exactly that many steps, so a
  // checkpoint's name never lies about its weights.
  std::string save_checkpoint(int steps_done);
  // One optimizer step (all micro-batches of the global batch); with
  // `show_progress`, a step slower than a few seconds shows its micro-batches
  // on rank 0's terminal (trainer/step_progress.h).
  StepResult train_step(int step, bool show_progress = false);
  // Mean loss over the kept targets of the first training.eval_sequences
  // sequences of data.val.
  float evaluate();
  // Text generated from the BOS token (needs data.tokenizer).
  std::string sample(int tokens);

  ShardingEngine& engine() { return *engine_; }
  Topology& topology() { return topology_; }
  Transformer& model() { return *model_; }
  const Config& config() const { return config_; }
  int accumulation_steps() const { return accumulation_steps_; }
  // training.fp8_scaling = delayed: the amax history (else none).
  const std::optional<Fp8AmaxHistory>& fp8_amax_history() const { return fp8_history_; }

 private:
  // Loads checkpoint.resume (or the run dir's latest with "auto"), else
  // model.init_from; sets start_step_. Refuses a checkpoint of another model
  // and a stop_at_step it has passed; warns of schedule and data changes.
  void restore_state();
  // Refuses to save the state as step_<steps_done> unless it is after
  // exactly that many steps.
  void check_save_step(int steps_done) const;
  // The saver of run()'s saves with checkpoint.async, when every rank's copy
  // fits in its free host memory; else null (blocking saves).
  std::unique_ptr<BackgroundSaver> background_saver();
  // Rank 0: locks the run directory for this run (refusing a second run on
  // it) and removes what interrupted saves left there.
  void claim_run_dir();
  // One rank's peak FLOP/s for the log's MFU: logging.peak_tflops, else on
  // the CPU the measured sgemm rate, else 0 (unknown).
  double peak_flops_per_rank() const;
  // Rank 0's lines at the start of run(): the run's shape, memory and
  // offload, and the metrics log's start and memory records.
  void log_run_start(const StateBytes& state, size_t activations);
  // What a checkpoint saves beside the tensors.
  TrainerState trainer_state() const;

  Config config_;
  std::optional<Tokenizer> tokenizer_;  // data.tokenizer, loaded at start
  Group& host_world_;                   // the world as given: host buffers (MPI)
  // With training.device = cuda: the world as a group of device buffers
  // (NCCL, or MPI staged through host memory); null on the CPU.
  std::unique_ptr<Group> device_world_;
  Topology topology_;
  int accumulation_steps_;
  int start_step_ = 0;
  int state_step_ = 0;  // optimizer steps the parameters and moments hold
  SpikeGuard spike_guard_;
  std::string resumed_from_;
  int resumed_changes_ = 0;  // schedule settings that differ from the resumed checkpoint's
  double load_seconds_ = 0;
  std::unique_ptr<Transformer> model_;
  // training.fp8_scaling = delayed: the amax history (else none).
  std::optional<Fp8AmaxHistory> fp8_history_;
  std::unique_ptr<ShardingEngine> engine_;
  std::unique_ptr<DataLoader> train_data_;
  std::unique_ptr<DataLoader> val_data_;
  // run()'s saves in the background (checkpoint.async), null otherwise; after
  // the engine, which its copies read.
  std::unique_ptr<BackgroundSaver> saver_;
  std::vector<int32_t> inputs_, targets_;   // (micro_batch_size, seq_len)
  std::unique_ptr<FileLock> run_dir_lock_;  // rank 0, during run()
  MetricsLog metrics_;
};

}  // namespace llm
