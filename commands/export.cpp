// Checkpoint -> Hugging Face directory (see export.h).
#include "commands/export.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "interop/hf_llama.h"
#include "persistence/checkpoint.h"
#include "persistence/run_directory.h"
#include "base/error.h"
#include "base/file_io.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

// Every special token as transformers' added_tokens_decoder lists one.
nlohmann::ordered_json added_tokens_decoder(const Tokenizer& tokenizer) {
  nlohmann::ordered_json decoder = nlohmann::ordered_json::object();
  for (int id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::string piece = tokenizer.piece(id);
    if (tokenizer.special_id(piece) != id) continue;
    decoder[std::to_string(id)] = {{"content", piece},     {"lstrip", false},
                                   {"normalized", false},  {"rstrip", false},
                                   {"single_word", false}, {"special", true}};
  }
  return decoder;
}

// transformers' view of the tokenizer, adding BOS as training did (none for
// Qwen's): a SentencePiece model as a Llama tokenizer with its special
// pieces; a byte-level BPE (Llama 3's kinds, Qwen's) as its tokenizer.json
// for the fast tokenizer class. Padding is the document end, as Qwen's.
void write_tokenizer(const Tokenizer& tokenizer, const ChatTemplate* chat, int max_length,
                     const fs::path& out) {
  nlohmann::ordered_json config;
  if (tokenizer.kind() == TokenizerKind::sentencepiece) {
    fs::copy_file(tokenizer.path(), out / "tokenizer.model", fs::copy_options::overwrite_existing);
    config = {{"tokenizer_class", "LlamaTokenizer"},
              {"add_bos_token", true},
              {"add_eos_token", false},
              {"legacy", false}};
  } else {
    write_file_atomically((out / "tokenizer.json").string(), tokenizer.hf_tokenizer_json());
    config = {{"tokenizer_class", "PreTrainedTokenizerFast"}};
  }
  config["clean_up_tokenization_spaces"] = false;
  config["model_max_length"] = max_length;
  config["added_tokens_decoder"] = added_tokens_decoder(tokenizer);
  const int bos = tokenizer.bos_id();
  config["bos_token"] = bos >= 0 ? nlohmann::ordered_json(tokenizer.piece(bos)) : nullptr;
  config["eos_token"] = tokenizer.piece(tokenizer.eos_id());
  config["pad_token"] = tokenizer.piece(tokenizer.eos_id());
  if (tokenizer.unk_id() >= 0) config["unk_token"] = tokenizer.piece(tokenizer.unk_id());
  if (chat) config["chat_template"] = chat->hf_chat_template();
  write_file_atomically((out / "tokenizer_config.json").string(), config.dump(2) + "\n");
}

}  // namespace

ExportResult export_checkpoint(const ExportRequest& request) {
  const fs::path out(request.out);
  if (fs::exists(out) && !request.force) {
    LLM_CHECK(fs::is_directory(out), "./train export: --out {} exists and is not a directory",
              request.out);
    LLM_CHECK(fs::is_empty(out),
              "./train export: --out {} is not empty; pass --force to replace the files it holds",
              request.out);
  }
  ExportResult result;
  result.checkpoint = checkpoint_step_directory(request.checkpoint, "./train export");
  const Config config = checkpoint_read_config(result.checkpoint);
  const ParameterLayout layout = layout_build(config.model);
  const std::vector<float> params = checkpoint_read_params(result.checkpoint, layout);
  result.parameters = layout.total_numel;

  std::optional<Tokenizer> tokenizer;
  if (!config.data.tokenizer.empty()) {
    tokenizer.emplace(
        Tokenizer::load(checkpoint_tokenizer(result.checkpoint, config, "./train export")));
  }
  LLM_CHECK(request.chat_format.empty() || tokenizer,
            "./train export: --chat-format {}: the run of {} had no data.tokenizer",
            request.chat_format, result.checkpoint);
  // The chat format prepare --chat and generate --chat pick for the same
  // tokenizer and name.
  std::optional<ChatTemplate> chat;
  if (tokenizer && (!request.chat_format.empty() || ChatTemplate::has_format(*tokenizer))) {
    chat.emplace(ChatTemplate::for_tokenizer(*tokenizer, request.chat_format));
    result.chat_format = chat->name();
  }
  HfExportOptions options;
  options.dtype = request.dtype;
  options.max_position_embeddings = config.training.seq_len;
  if (tokenizer) {
    options.bos_token_id = tokenizer->bos_id();
    options.eos_token_id = tokenizer->eos_id();
  }
  if (chat) options.end_of_turn_id = chat->end_of_turn_id();
  hf_export(config.model, layout, params.data(), request.out, options);
  if (tokenizer) {
    write_tokenizer(*tokenizer, chat ? &*chat : nullptr, config.training.seq_len, out);
    result.tokenizer = true;
  }
  return result;
}

}  // namespace llm
