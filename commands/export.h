// `./train export`: a checkpoint (a step directory, or a run directory whose
// `latest` names one) as a Hugging Face Llama directory that transformers
// loads at once: model.safetensors and config.json (interop/hf_llama.h),
// plus, when the run had a tokenizer, its tokenizer.model (SentencePiece) or
// tokenizer.json (byte-level BPE) with a tokenizer_config.json naming its
// special tokens, and a generation_config.json. Where the tokenizer has a
// chat format (data/chat_template.h), tokenizer_config.json carries it as
// the chat template, so that apply_chat_template gives prepare --chat's
// ids, and generation stops at its end of turn as generate --chat does.
// Invariant: an output directory that holds anything is refused before a
// byte is written, unless `force`.
#pragma once

#include <cstddef>
#include <string>

namespace llm {

struct ExportRequest {
  std::string checkpoint;  // step_N directory, or a run directory (follows `latest`)
  std::string out;
  std::string dtype = "float32";  // or "bfloat16"
  bool force = false;             // replace the files of a non-empty `out`
  std::string chat_format;        // llama3, chatml, or empty for the tokenizer's (if any)
};

struct ExportResult {
  std::string checkpoint;  // the step directory exported
  size_t parameters = 0;
  bool tokenizer = false;   // tokenizer.model or .json and tokenizer_config.json written
  std::string chat_format;  // the chat template written (its name), or empty for none
};

ExportResult export_checkpoint(const ExportRequest& request);

}  // namespace llm
