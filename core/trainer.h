// The training loop: data -> micro-batches -> forward/backward -> gradient
// clipping -> AdamW, with evaluation, logging, metrics and a final sample.
// Invariant: the sequences of optimizer step s are stream positions
// [s * batch_size, (s + 1) * batch_size) of the training loader, so a run's
// data order depends only on (seed, step), never on timing.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/log.h"
#include "data/loader.h"
#include "model/transformer.h"
#include "parallel/sharding_engine.h"

namespace llm {

// What the model state, activations and batch buffers of a config need on
// one rank; computed without allocating.
struct MemoryPlan {
  StateBytes state;
  size_t activations = 0;
  size_t total() const { return state.total() + activations; }
};
MemoryPlan memory_plan(const Config& config);

// Throws, with one line naming the config and both figures, when the plan
// exceeds the memory this machine has available.
void check_memory_fits(const Config& config);

struct StepResult {
  float loss;
  float grad_norm;
  float lr;
};

class Trainer {
 public:
  explicit Trainer(Config config);

  // Runs training.steps steps with evaluation and logging; then the sample.
  void run();
  // One optimizer step (all micro-batches of the global batch).
  StepResult train_step(int step);
  // Mean loss over the first training.eval_sequences sequences of data.val.
  float evaluate();
  // Text generated from the BOS token (needs data.tokenizer).
  std::string sample(int tokens);

  ShardingEngine& engine() { return *engine_; }
  Transformer& model() { return *model_; }
  const Config& config() const { return config_; }
  int accumulation_steps() const { return accumulation_steps_; }

 private:
  Config config_;
  int accumulation_steps_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<ShardingEngine> engine_;
  std::unique_ptr<DataLoader> train_data_;
  std::unique_ptr<DataLoader> val_data_;
  std::vector<int32_t> inputs_, targets_;  // (micro_batch_size, seq_len)
  MetricsLog metrics_;
};

}  // namespace llm
