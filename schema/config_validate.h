// The rules a config must keep that need nothing but the config: each key's
// own range (config.h) and the rules that relate keys. Every error names the
// key and where its value came from (key_origin.h). The rules that need the
// world or the tokenizer are the trainer's launch_validate
// (trainer/launch_validate.h).
#pragma once

#include "schema/config.h"

namespace llm {

// Checks values that make no sense on their own or together (every number
// finite and in its key's range); names the key, and the command line when
// an override set it.
void config_validate(const Config& config);

// What a tensor-parallel degree tp must split evenly (heads whole, kv heads,
// ffn columns, vocabulary rows, sequence rows) and does not: the first such
// key and its value, or a null key when tp splits them all.
struct UnevenSplit {
  const char* key = nullptr;
  int value = 0;
};
UnevenSplit tensor_parallel_uneven_split(const Config& config, int tp);

}  // namespace llm
