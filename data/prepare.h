// Documents -> token shards: read text, JSON Lines or JSON files (gzip or not;
// document_reader.h), hold out a deterministic validation split, encode each
// document as BOS + text + EOS with the given tokenizer (or one trained here:
// SentencePiece BPE on the training documents, written as
// out_dir/tokenizer.model and tokenizer.vocab), and write out_dir/train_NNN.bin
// and val_NNN.bin. With chat, each record's messages are a conversation
// rendered in the model's chat format (chat_template.h) and every shard gets
// a loss mask keeping the assistant's tokens (loss_mask.h); every record is
// checked before any file is written. Invariant: the same inputs and options
// give the same output files, byte for byte, whatever the number of jobs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llm {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files or directories (recursed, sorted)
  std::string out_dir;
  int vocab_size = 4096;               // a target; small corpora may end below it
  double val_fraction = 0.05;          // expected share of documents held out (0: none)
  int64_t shard_tokens = 100'000'000;  // at most this many tokens per shard
  uint64_t seed = 1337;                // decides the train/val split
  bool quiet = false;                  // no progress lines, SentencePiece silent
  std::string tokenizer;               // encode with this one (tokenizer.h) instead of training
  std::string text_field;              // of JSON records; empty: "text" ("messages" with chat)
  bool skip_missing_text = false;      // skip records without it (counted), else an error
  int jobs = 1;                        // documents encoded in parallel
  bool chat = false;                   // records are conversations (needs a tokenizer)
  std::string chat_format;             // with chat: llama3, chatml, or empty for the tokenizer's
};

void prepare_dataset(const PrepareOptions& options);

}  // namespace llm
