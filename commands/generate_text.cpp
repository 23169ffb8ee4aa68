// Model, tokenizer and context of a checkpoint or Hugging Face directory,
// then sampling (see generate_text.h).
#include "commands/generate_text.h"

#include <chrono>
#include <filesystem>

#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "interop/hf_llama.h"
#include "model/transformer.h"
#include "persistence/checkpoint.h"
#include "persistence/run_directory.h"
#include "base/error.h"
#include "commands/inference_params.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCommand = "./train generate";

// What a source directory gives: the model's shape and parameters, its
// tokenizer, context length and precision.
struct LoadedModel {
  std::string source;
  ModelConfig config;
  std::vector<float> params;
  std::string tokenizer;
  int context = 0;
  Device device = Device::cpu;
  Precision precision = Precision::fp32;
};

bool is_hugging_face_dir(const fs::path& dir) {
  return fs::exists(dir / "config.json") && !fs::exists(dir / "meta.json");
}

LoadedModel load_hugging_face(const fs::path& dir) {
  LoadedModel m;
  m.source = dir.string();
  m.config = hf_read_config(dir.string());
  const ParameterLayout layout = layout_build(m.config);
  const HfWeights weights = HfWeights::open(dir.string(), m.config, layout);
  m.params.resize(layout.total_numel);
  size_t offset = 0;
  for (size_t u = 0; u < layout.units.size(); offset += layout.units[u++].numel) {
    weights.read(static_cast<int>(u), 0, layout.units[u].numel, m.params.data() + offset);
  }
  m.tokenizer = dir.string();  // its tokenizer.model or tokenizer.json (Tokenizer::load)
  m.context = hf_read_context_length(dir.string());
  return m;
}

LoadedModel load_checkpoint(const std::string& path) {
  LoadedModel m;
  m.source = checkpoint_step_directory(path, kCommand);
  const Config run = checkpoint_read_config(m.source);
  m.config = run.model;
  m.params = checkpoint_read_params(m.source, layout_build(m.config));
  m.tokenizer = checkpoint_tokenizer(m.source, run, kCommand);
  m.context = run.training.seq_len;
  m.device = run.device();
  m.precision = run.precision();
  return m;
}

}  // namespace

GeneratedText generate_text(const GenerateRequest& request) {
  LLM_CHECK(request.samples >= 1, "{}: --samples must be at least 1, got {}", kCommand,
            request.samples);
  LLM_CHECK(request.chat || request.chat_format.empty(), "{}: --chat-format {} is for --chat",
            kCommand, request.chat_format);
  LoadedModel m = is_hugging_face_dir(request.model) ? load_hugging_face(request.model)
                                                     : load_checkpoint(request.model);
  if (request.device) m.device = *request.device;
  if (m.device == Device::cuda) {
    LLM_CHECK(
        cuda_device_count() > 0, "{}: --device cuda, but {}", kCommand,
        kBuiltWithCuda ? "this machine has no CUDA device" : "this build has no CUDA backend");
    cuda_use_device(0);
  }
  const Tokenizer tokenizer = Tokenizer::load(m.tokenizer);
  std::optional<ChatTemplate> chat;
  std::vector<int32_t> prompt;
  if (request.chat) {
    chat = ChatTemplate::for_tokenizer(tokenizer, request.chat_format);
    prompt = chat->render_prompt(request.prompt);
  } else {
    prompt = tokenizer.encode(request.prompt);
    if (tokenizer.bos_id() >= 0) prompt.insert(prompt.begin(), tokenizer.bos_id());
    LLM_CHECK(!prompt.empty(),
              "{}: the prompt is empty and the tokenizer {} has no BOS to start from; pass "
              "--prompt",
              kCommand, tokenizer.path());
  }
  LLM_CHECK(static_cast<int>(prompt.size()) <= m.context,
            "{}: the prompt is {} tokens, the model's context only {}", kCommand, prompt.size(),
            m.context);

  const Backend& backend = backend_for(m.device);
  const std::unique_ptr<Transformer> model =
      Transformer::create(m.config, request.samples, m.context, backend, {}, m.precision);
  InferenceParams params(model->layout(), m.params, backend, m.precision);
  m.params = {};  // uploaded
  model->reserve_kv_cache(request.samples, m.context);

  SamplingOptions sampling = request.sampling;
  sampling.stop_token = chat ? chat->end_of_turn_id() : tokenizer.eos_id();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::vector<int32_t>> samples =
      generate(*model, params, prompt, request.samples, sampling);
  GeneratedText out;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.source = m.source;
  out.prompt_tokens = static_cast<int>(prompt.size());
  out.context = m.context;
  for (const std::vector<int32_t>& sample : samples) {
    out.new_tokens += static_cast<int>(sample.size());
    const bool ended = !sample.empty() && sample.back() == sampling.stop_token;
    out.context_full |= !ended && static_cast<int>(sample.size()) < sampling.max_new_tokens;
    // Decoded with the prompt (less its BOS), so the first new piece keeps
    // its leading space; a reply keeps its end of turn, part of the chat format.
    std::vector<int> text(prompt.begin() + (tokenizer.bos_id() >= 0 ? 1 : 0), prompt.end());
    text.insert(text.end(), sample.begin(), ended && !chat ? sample.end() - 1 : sample.end());
    out.texts.push_back(tokenizer.decode(text));
  }
  return out;
}

}  // namespace llm
