// The Llama block's parts, in order, and the table their rows make (see block.h).
#include "model/block.h"

namespace llm {

// Each declared in its file of model/parts/.
extern const BlockPartDeclaration kAttentionNorm, kQkvProjection, kQkvBias, kQkNorm, kAttention,
    kMlpNorm, kSwigluFfn;

const std::vector<const BlockPartDeclaration*>& all_block_parts() {
  static const std::vector<const BlockPartDeclaration*> parts = {
      &kAttentionNorm, &kQkvProjection, &kQkvBias, &kQkNorm, &kAttention, &kMlpNorm, &kSwigluFfn};
  return parts;
}

int64_t BlockTensorSpec::rows() const {
  int64_t total = 0;
  for (const TensorPart& part : parts) total += part.rows;
  return total;
}

std::vector<PlacedPart> block_parts(const ModelConfig& config) {
  std::vector<PlacedPart> placed;
  int row = 0;
  for (const BlockPartDeclaration* part : all_block_parts()) {
    if (!part->enabled(config)) continue;
    placed.push_back({part, row});
    row += static_cast<int>(part->tensors(config).size());
  }
  return placed;
}

std::vector<BlockTensorSpec> block_tensors(const ModelConfig& config) {
  std::vector<BlockTensorSpec> table;
  for (const PlacedPart& placed : block_parts(config)) {
    for (BlockTensorSpec& spec : placed.part->tensors(config)) table.push_back(std::move(spec));
  }
  return table;
}

ReplicatedGains replicated_gains(const ModelConfig& config) {
  ReplicatedGains out;
  const std::vector<BlockTensorSpec> table = block_tensors(config);
  for (size_t row = 0; row < table.size(); ++row) {
    if (table[row].split != TensorParallelSplit::replicated) continue;
    out.gains.push_back({static_cast<int>(row), table[row].rows(), out.width});
    out.width += table[row].rows();
  }
  return out;
}

}  // namespace llm
