// `./train export`: a checkpoint as a Hugging Face Llama directory
// (export.h), its options declared once (command_options.h).
#pragma once

#include "commands/command.h"
#include "commands/export.h"

namespace llm {

struct ExportArguments : ExportRequest {
  static constexpr const char* kName = "export";
  static constexpr const char* kAbout =
      "Write a checkpoint as a Hugging Face Llama directory: model.safetensors, config.json, "
      "generation_config.json and, when the run had one, the tokenizer (tokenizer.model or "
      "tokenizer.json, and tokenizer_config.json with its special tokens and, where the tokenizer "
      "has one, the chat format of prepare --chat as its chat template). The run directory's own "
      "copy of its tokenizer "
      "is used, so this works from any directory. The reverse: [model] init_from = \"DIR\" starts "
      "training from such weights.";
  static constexpr bool kTakesOverrides = false;

  template <class V>
  void visit_fields(V&& v) {
    v("checkpoint", checkpoint, "a step_N directory, or a run directory: its latest",
      required("DIR"));
    v("out", out, "the Hugging Face directory written", required("DIR"));
    v("dtype", dtype, "the weights' type: float32 or bfloat16", "float32|bfloat16");
    v("force", force, "replace the files of a non-empty --out (refused otherwise)");
    v("chat-format", chat_format, "the chat template written, instead of the tokenizer's own",
      "llama3|chatml");
  }
};

int run_export(const ExportArguments& arguments, const CommandLine& line);

}  // namespace llm
