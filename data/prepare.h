// Text -> token shards: read text files, split them into documents, hold out a
// deterministic validation split, train a SentencePiece BPE tokenizer on the
// training documents, and write out_dir/{tokenizer.model, tokenizer.vocab,
// train_NNN.bin, val_NNN.bin}. Invariant: the same inputs and options give the
// same output files, byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llm {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files or directories (recursed, sorted)
  std::string out_dir;
  int vocab_size = 4096;               // a target; small corpora may end below it
  double val_fraction = 0.05;          // expected share of documents held out
  int64_t shard_tokens = 100'000'000;  // at most this many tokens per shard
  uint64_t seed = 1337;                // decides the train/val split
  bool quiet = false;                  // no progress lines, SentencePiece silent
};

void prepare_dataset(const PrepareOptions& options);

}  // namespace llm
