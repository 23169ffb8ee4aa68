// `./train generate`: text from a trained model. The model comes from a
// checkpoint (a step directory, or a run directory whose `latest` names one)
// or a Hugging Face Llama directory (config.json, model.safetensors and
// tokenizer.model, as `./train export` writes); the prompt is encoded with
// its tokenizer (SentencePiece's byte fallback covers any text), after BOS,
// or with chat as a user's turn and the assistant's header (chat_template.h),
// and `samples` continuations are decoded together with a key/value cache
// (model/generate.h), each ending at EOS (chat: the end-of-turn token) or
// max_new_tokens.
// Invariant: one process and one device; parameters only (no gradients or
// optimizer state), in the run's precision (fp32 for a Hugging Face directory).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/generate.h"
#include "device/device.h"

namespace llm {

struct GenerateRequest {
  std::string model;   // step_N, a run directory, or a Hugging Face directory
  std::string prompt;  // may be empty: the samples start from BOS alone
  int samples = 1;
  SamplingOptions sampling;      // its stop_token is the tokenizer's EOS (chat: end of turn)
  std::optional<Device> device;  // default: the run's training.device (Hugging Face: cpu)
  bool chat = false;             // the prompt is a user's turn; the samples are replies
  std::string chat_format;       // with chat: llama3, chatml, or empty for the tokenizer's
};

struct GeneratedText {
  std::string source;  // the step directory or Hugging Face directory read
  // Each sample: the prompt and its continuation, decoded together (chat: in
  // the format, its end-of-turn token included, BOS left out).
  std::vector<std::string> texts;
  int prompt_tokens = 0;      // BOS included
  int new_tokens = 0;         // over all samples
  int context = 0;            // positions per sample the model attends over
  bool context_full = false;  // some sample stopped because the context was full
  double seconds = 0;         // prefill and decoding
};

GeneratedText generate_text(const GenerateRequest& request);

}  // namespace llm
