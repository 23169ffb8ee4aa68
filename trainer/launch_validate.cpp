// The rules that need the world or the tokenizer (see launch_validate.h).
#include "trainer/launch_validate.h"

#include <spdlog/spdlog.h>

#include "parallel/topology.h"
#include "cost_models/memory_plan.h"
#include "base/error.h"
#include "schema/key_origin.h"

namespace llm {

const Config& launch_validate(const Config& config, int world_size, const Tokenizer* tokenizer,
                              bool warn) {
  const KeyOrigin at(config);
  const ParallelConfig& p = config.parallel;
  const int dp = data_parallel_size(p, world_size);  // refused where the mesh does not divide
  micro_batches_per_step(config.training, dp);       // refused where the batch does not
  LLM_CHECK(p.mode != ParallelMode::hybrid || dp % p.shard_group_size == 0,
            "{}: parallel.shard_group_size ({}) must divide the data-parallel size ({}) for mode "
            "hybrid",
            at("parallel.shard_group_size"), p.shard_group_size, dp);
  check_memory_fits(config, sharding_plan(p, dp), rank_memory_declared(config));
  if (!tokenizer) return config;
  const int pieces = tokenizer->vocab_size(), rows = config.model.vocab_size;
  LLM_CHECK(pieces <= rows,
            "{}: the tokenizer {} has {} ids but model.vocab_size is {}: ids {} and up have no "
            "embedding row",
            at("model.vocab_size"), tokenizer->path(), pieces, rows, rows);
  if (pieces < rows && warn) {
    spdlog::warn(
        "{}: model.vocab_size is {} but the tokenizer {} has {} pieces: {} embedding rows will "
        "never see a token (set model.vocab_size = {})",
        at("model.vocab_size"), rows, tokenizer->path(), pieces, rows - pieces, pieces);
  }
  return config;
}

}  // namespace llm
