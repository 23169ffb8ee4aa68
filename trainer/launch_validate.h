// The rules a run must keep that need more than its config (those are
// schema/config_validate.h's): the world it was launched in and the
// tokenizer it reads. Each error names the key and where its value came
// from, like the config's own.
#pragma once

#include "data/tokenizer.h"
#include "schema/config.h"

namespace llm {

// Checks `config` for a world of `world_size` ranks and its tokenizer (null
// when data.tokenizer is empty): the mesh divides the world and the global
// batch its micro-batches over the data-parallel ranks (checked where they
// are computed: data_parallel_size, micro_batches_per_step), hybrid
// sharding's groups divide the data-parallel ranks, a rank's memory plan at
// this world fits parallel.memory_per_rank (when set; the trainer checks
// what it finds free besides), every tokenizer id has an embedding row (a
// warning, on `warn`, when rows go unused). Returns config, so that a
// constructor can check before it builds. `./train supervise` applies the
// same rules to each world it may relaunch at.
const Config& launch_validate(const Config& config, int world_size, const Tokenizer* tokenizer,
                              bool warn);

}  // namespace llm
