// `./train generate`: text from a trained model (generate_text.h), its
// options declared once (command_options.h).
#pragma once

#include "commands/command.h"
#include "commands/generate_text.h"

namespace llm {

struct GenerateArguments : GenerateRequest {
  static constexpr const char* kName = "generate";
  static constexpr const char* kAbout =
      "Sample text from a model. The prompt is encoded after BOS; each sample ends at EOS, after "
      "--max-new-tokens or when the context is full. Prints each sample and the tokens per "
      "second.";
  static constexpr bool kTakesOverrides = false;

  GenerateArguments();  // 128 new tokens, top-p 0.95

  template <class V>
  void visit_fields(V&& v) {
    v("checkpoint", model,
      "a checkpoint (step_N, or a run directory: its latest) or a Hugging Face directory with "
      "tokenizer.model or tokenizer.json (as export writes)",
      required("DIR"));
    v("prompt", prompt, "the text the samples continue");
    v("samples", samples, "samples drawn together", between(1, 4096));
    v("max-new-tokens", sampling.max_new_tokens, "tokens each sample adds at most",
      between(1, 1 << 20));
    v("temperature", sampling.temperature, "0: greedy", between(0, 100));
    v("top-k", sampling.top_k, "keep the K likeliest tokens; 0: off",
      OptionRule("K", between(0, 1 << 30)));
    v("top-p", sampling.top_p,
      "keep the fewest likeliest tokens whose probability reaches P; 1: off",
      OptionRule("P", kUnitClosed));
    v("seed", sampling.seed, "seeds the draws");
    v("device", device, "where it runs; by default the run's training.device (Hugging Face: cpu)");
    v("chat", chat,
      "the prompt is a user's turn in the chat format (as prepare --chat), followed by the "
      "assistant's header; each reply ends at the end-of-turn token and is printed in the "
      "format, special tokens included");
    v("chat-format", chat_format, "with --chat: llama3 or chatml instead of the tokenizer's own",
      "NAME");
  }
};

int run_generate(const GenerateArguments& arguments, const CommandLine& line);

}  // namespace llm
