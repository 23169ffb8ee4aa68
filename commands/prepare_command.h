// `./train prepare`: documents into llm.c token shards (data/prepare.h), its
// options declared once (command_options.h).
#pragma once

#include "commands/command.h"
#include "data/prepare.h"

namespace llm {

struct PrepareArguments : PrepareOptions {
  static constexpr const char* kName = "prepare";
  static constexpr const char* kAbout =
      "Encode documents into train_*.bin and val_*.bin in DIR, each as BOS + text + EOS. Inputs: "
      "files or directories of text, .jsonl or .json records, each possibly .gz. Without "
      "--tokenizer a SentencePiece BPE of --vocab-size pieces is trained on the train split and "
      "written to DIR.";
  static constexpr bool kTakesOverrides = false;

  PrepareArguments();  // jobs: every core

  template <class V>
  void visit_fields(V&& v) {
    v("input", inputs, "a file or directory of documents; give it once per input",
      required(repeatable("PATH")));
    v("out", out_dir, "the directory the shards go to", required("DIR"));
    v("tokenizer", tokenizer,
      "encode with it: a SentencePiece .model, a tiktoken file (Llama 3's tokenizer.model), a "
      "tokenizer.json or a model directory",
      "PATH");
    v("vocab-size", vocab_size, "pieces of the tokenizer trained when --tokenizer is not given",
      kPositive);
    v("text-field", text_field,
      "the field of a JSON record that holds the document (text; messages with --chat)", "NAME");
    v("skip-missing-text", skip_missing_text,
      "skip (and count) records without the text field, instead of refusing them");
    v("jobs", jobs,
      "documents encoded in parallel (by default one per core of this machine); "
      "the shards are the same for any number",
      kPositive);
    v("val-fraction", val_fraction, "the share of documents held out for validation",
      kUnitHalfOpen);
    v("shard-tokens", shard_tokens, "at most this many tokens per shard", kPositive);
    v("seed", seed, "decides the train / validation split");
    v("quiet", quiet, "no progress lines");
    v("chat", chat,
      "each record's messages (role system / user / assistant, content) in the tokenizer's chat "
      "format, with a loss mask beside each shard (<shard>.mask) that keeps the assistant's "
      "tokens only");
    v("chat-format", chat_format,
      "with --chat: llama3 or chatml instead of the tokenizer's own format", "NAME");
  }
};

int run_prepare(const PrepareArguments& arguments, const CommandLine& line);

}  // namespace llm
