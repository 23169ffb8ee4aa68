// Where a run's state starts: a checkpoint to resume (checkpoint.resume:
// the run directory's latest, or a path), checked against the config, or
// for a fresh fine-tune the Hugging Face weights of model.init_from.
#include <spdlog/spdlog.h>

#include <chrono>

#include "interop/hf_llama.h"
#include "persistence/checkpoint.h"
#include "persistence/config_diff.h"
#include "persistence/run_directory.h"
#include "trainer/hf_weights_source.h"
#include "trainer/trainer.h"

namespace llm {

void Trainer::restore_state() {
  const std::string& resume = config_.checkpoint.resume;
  std::string path;
  if (resume == "auto") {
    path = checkpoint_latest(config_.run_dir());
  } else if (resume != "none") {
    path = resume;
  }
  const std::string start_fresh =
      "to start fresh instead, pass --checkpoint.resume=none or use a new checkpoint.dir";
  if (!path.empty()) {
    const auto start = std::chrono::steady_clock::now();
    start_step_ = checkpoint_load(path, *engine_, /*show_progress=*/topology_.world.rank() == 0);
    // A checkpoint of a run under current scaling has none: step 1 then
    // scales as current scaling does.
    if (fp8_history_)
      fp8_history_->restore(checkpoint_read_trainer_state(path).fp8_amax_history, path);
    load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    resumed_from_ = path;
    const ConfigChanges changes = checkpoint_config_changes(path, config_);
    std::string model_changes;
    for (const std::string& change : changes.model) {
      model_changes += (model_changes.empty() ? "" : ", ") + change;
    }
    LLM_CHECK(changes.model.empty(), "{}: cannot resume {}, saved with another model ({}); {}",
              config_.path, path, model_changes, start_fresh);
    for (const std::string& change : changes.schedule) {
      spdlog::warn("resuming {} under a changed setting: {}", path, change);
    }
    resumed_changes_ = static_cast<int>(changes.schedule.size());
    LLM_CHECK(start_step_ <= config_.training.steps,
              "{}: checkpoint {} is at step {}, beyond training.steps ({})", config_.path, path,
              start_step_, config_.training.steps);
    const int stop_at = config_.training.stop_at_step;
    LLM_CHECK(stop_at == 0 || stop_at > start_step_,
              "{}: training.stop_at_step = {} but the run resumes from {} at step {}, already past "
              "it; pass a later stop_at_step, or {}",
              config_.path, stop_at, path, start_step_, start_fresh);
    if (!config_.model.init_from.empty()) {
      spdlog::info(
          "resuming from {}: the weights of model.init_from ({}) only seed a fresh run and are "
          "not read",
          path, config_.model.init_from);
    }
  } else if (!config_.model.init_from.empty()) {
    // Fine-tuning: parameters from Hugging Face weights, fresh AdamW moments.
    // The engine asks for the whole model's units and offsets (a tensor slice
    // or a pipeline stage reads its part of them).
    if (tokenizer_) {
      hf_check_document_tokens(config_.model.init_from, tokenizer_->path(), tokenizer_->bos_id(),
                               tokenizer_->eos_id());
    }
    HfWeights weights =
        HfWeights::open(config_.model.init_from, config_.model, layout_build(config_.model));
    HfWeightsSource source(weights);
    engine_->load_state(source, /*with_moments=*/false);
  }
  state_step_ = start_step_;
}

}  // namespace llm
