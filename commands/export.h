// `./train export`: a checkpoint (a step directory, or a run directory whose
// `latest` names one) as a Hugging Face Llama directory that transformers
// loads at once: model.safetensors and config.json (interop/hf_llama.h),
// plus, when the run had a tokenizer, its tokenizer.model (SentencePiece) or
// tokenizer.json (byte-level BPE) with a tokenizer_config.json, and a
// generation_config.json.
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
};

struct ExportResult {
  std::string checkpoint;  // the step directory exported
  size_t parameters = 0;
  bool tokenizer = false;  // tokenizer.model or .json and tokenizer_config.json written
};

ExportResult export_checkpoint(const ExportRequest& request);

}  // namespace llm
