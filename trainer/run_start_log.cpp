// What a run says as it starts: its config, mesh and mode, the imported
// model keys, document masking, the pipeline stage, memory per rank, and the
// same as metrics records.
#include <spdlog/spdlog.h>

#include "base/build_info.h"
#include "base/system.h"
#include "parallel/pipeline_schedule.h"
#include "trainer/trainer.h"

namespace llm {

void Trainer::log_run_start(const StateBytes& state, size_t activations) {
  const TrainingConfig& t = config_.training;
  const int stages = topology_.pipeline->size();
  spdlog::info(
      "config {} | {} parameters | batch {} x {} tokens | {} ranks: tensor parallel {} x "
      "pipeline parallel {} x data parallel {}, mode {} (shard group {}) | {} "
      "micro-batches of {} per rank | commit {}",
      config_.path, layout_build(config_.model).total_numel, t.batch_size, t.seq_len,
      topology_.world.size(), topology_.tensor->size(), stages, topology_.dp_size(),
      topology_.plan.mode, topology_.plan.shard_group_size, accumulation_steps_, t.micro_batch_size,
      build_commit());
  if (!config_.imported.empty()) {
    std::string keys;
    for (const auto& [key, origin] : config_.imported) keys += (keys.empty() ? "" : ", ") + key;
    spdlog::info("model from {} (model.init_from): {}", config_.imported.begin()->second, keys);
  }
  if (config_.data.document_masking) {
    const DocumentBoundary boundary = tokenizer_->document_boundary();
    spdlog::info(
        "document masking: attention stays inside each document (a document starts {} {}, id "
        "{}), no loss on a target that crosses a boundary; RoPE positions {}; FLOP/s and MFU "
        "count causal attention over whole sequences, so what the mask skips counts as done",
        boundary.token_ends_document ? "after" : "at", tokenizer_->piece(boundary.token),
        boundary.token,
        config_.data.resets_positions() ? "restart at each document" : "run on across documents");
  }
  if (stages > 1) {
    const LayerRange layers = model_->layout().layers;
    spdlog::info(
        "pipeline stage {} of {}: blocks {}..{}{}{} | schedule {}, {} micro-batches in "
        "flight | bubble (P - 1) / (M + P - 1) = {:.1f}% of each step",
        topology_.pipeline->rank(), stages, layers.begin, layers.end - 1,
        model_->layout().slice.first_stage() ? " + embedding" : "",
        model_->layout().slice.last_stage() ? " + head" : "", config_.parallel.pipeline_schedule,
        model_->split().in_flight, 100 * pipeline_bubble_fraction(stages, accumulation_steps_));
  }
  spdlog::info(
      "memory per rank: parameters {}, gradients {}, optimizer {}, buffers {}, "
      "activations {} ({}, recompute {}); peak resident {}",
      format_bytes(state.params), format_bytes(state.grads), format_bytes(state.optimizer),
      format_bytes(state.buffers), format_bytes(activations), t.precision, t.recompute,
      format_bytes(peak_resident_bytes()));
  if (config_.offloads_optimizer()) {
    spdlog::info(
        "optimizer offloaded to the host{}: {} of host memory per rank (masters, moments, "
        "gradient landing{})",
        config_.zenflow.enabled ? " with ZenFlow" : "", format_bytes(state.host),
        config_.zenflow.enabled ? ", accumulator" : "");
  }
  if (metrics_.is_open()) {
    metrics_.write({{"event", "start"},
                    {"step", start_step_},
                    {"commit", build_commit()},
                    {"world_size", topology_.world.size()},
                    {"tensor_parallel", topology_.tensor->size()},
                    {"pipeline_parallel", stages},
                    {"data_parallel", topology_.dp_size()},
                    {"mode", to_string(topology_.plan.mode)},
                    {"precision", to_string(t.precision)},
                    {"micro_batches", accumulation_steps_}});
    metrics_.write({{"event", "memory"},
                    {"step", start_step_},
                    {"params_bytes", state.params},
                    {"grads_bytes", state.grads},
                    {"optimizer_bytes", state.optimizer},
                    {"buffers_bytes", state.buffers},
                    {"host_bytes", state.host},
                    {"activations_bytes", activations},
                    {"peak_rss_bytes", peak_resident_bytes()}});
  }
}

}  // namespace llm
