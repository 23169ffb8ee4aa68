// The parameter and FLOP counts of a config as JSON (see model_counts.h).
#include "commands/model_counts.h"

#include <nlohmann/json.hpp>

#include "model/flops.h"
#include "model/layout.h"

namespace llm {

std::string model_counts_json(const Config& config) {
  const ParameterLayout layout = layout_build(config.model);
  const size_t per_block = layout.units[layout.block_unit(0)].numel;
  const ModelFlops flops = step_flops(config);
  const nlohmann::json counts = {
      {"config", config.path},
      {"parameters",
       {{"total", layout.total_numel},
        {"embedding", layout.units[layout.embed_unit()].numel},
        {"per_block", per_block},
        {"blocks", per_block * static_cast<size_t>(config.model.n_layers)},
        {"head", layout.units[layout.head_unit()].numel}}},
      {"flops_per_step",
       {{"total", flops.total()}, {"matmul", flops.matmul}, {"attention", flops.attention}}},
      {"batch_size", config.training.batch_size},
      {"seq_len", config.training.seq_len},
  };
  return counts.dump(2) + "\n";
}

}  // namespace llm
