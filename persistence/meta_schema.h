// meta.json, a checkpoint's index: its format name, step, world size, mode,
// resolved config, the whole model's tensors, every shard's records and the
// trainer's state (checkpoint.h's TrainerState).
// read_meta validates every field the loaders read before anything reads
// it: a damaged file is one error naming the file and the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/layout.h"

namespace llm {

inline constexpr const char* kCheckpointFormat = "llm-train checkpoint v1";

// The whole model's tensors, as a layout (whole or a slice) knows them.
nlohmann::json tensor_index(const ParameterLayout& layout);

// meta.json of checkpoint `path`, validated against its schema and against
// `layout` when given.
nlohmann::json read_meta(const std::string& path, const ParameterLayout* layout);

}  // namespace llm
