// Pipeline messages per step (see pipeline_model.h).
#include "cost_models/pipeline_model.h"

namespace llm {

uint64_t pipeline_message_bytes(const Config& config) {
  const TrainingConfig& t = config.training;
  const uint64_t rows =
      static_cast<uint64_t>(t.micro_batch_size) * t.seq_len / config.parallel.tensor_parallel;
  const uint64_t element_bytes = stores_bf16(config.precision()) ? 2 : 4;
  return rows * config.model.dim * element_bytes;
}

PipelineTraffic pipeline_step_traffic(const Config& config, int micro_batches) {
  const uint64_t boundaries = static_cast<uint64_t>(config.parallel.pipeline_parallel - 1);
  PipelineTraffic traffic;
  traffic.sends = 2 * boundaries * static_cast<uint64_t>(micro_batches);
  traffic.sent_bytes = traffic.sends * pipeline_message_bytes(config);
  return traffic;
}

}  // namespace llm
