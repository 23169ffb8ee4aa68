// A tokenizer of one of the kinds Llama-family models ship (docs/data.md):
// a SentencePiece .model (Llama 2, Mistral, ours), a tiktoken BPE file
// (Llama 3's tokenizer.model) or a Hugging Face byte-level BPE tokenizer.json
// (Llama 3's, Qwen2's and Qwen3's), or a directory holding one. Text may be any bytes: invalid
// UTF-8 is replaced by U+FFFD first (utf8.h), as the reference libraries see
// it through Python. Special tokens are never produced from text.
// Invariant: a Tokenizer that loaded encodes to ids in [0, vocab_size()).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/document_boundary.h"

namespace llm {

enum class TokenizerKind { sentencepiece, tiktoken, hf_tokenizer_json };
const char* to_string(TokenizerKind kind);

// Where a run directory keeps the copy of its tokenizer that training makes,
// so that generate and export work wherever the run directory is.
std::string run_tokenizer_dir(const std::string& run_dir);

class Tokenizer {
 public:
  // A file of any kind (told apart by name and content), or a directory: its
  // tokenizer.model if it has one, else its tokenizer.json.
  static Tokenizer load(const std::string& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int> encode(std::string_view text) const;
  // Appends the ids of `text`, bracketed by bos_id() (where there is one)
  // and eos_id(): how every document goes into the token shards.
  void encode_document(std::string_view text, std::vector<int>& out) const;
  // The text of `ids` (bytes that split a UTF-8 character at either end come
  // out as U+FFFD).
  std::string decode(const std::vector<int>& ids) const;
  int vocab_size() const;
  int bos_id() const;  // -1 when documents have no BOS (Qwen's tokenizer.json)
  int eos_id() const;
  // Where two documents meet in the shards: at BOS, else after EOS.
  DocumentBoundary document_boundary() const;
  int unk_id() const;               // -1 when the kind has none (byte-level BPE covers every byte)
  std::string piece(int id) const;  // the text of id (e.g. "<s>", "<|begin_of_text|>")
  // The id of the special token spelled `text` (e.g. "<|eot_id|>"; for
  // SentencePiece a control piece), or -1 when there is none.
  int special_id(std::string_view text) const;
  TokenizerKind kind() const;
  // The file it was read from (a directory resolves to the file inside).
  const std::string& path() const;
  // A byte-level BPE as a Hugging Face tokenizer.json that encodes as this
  // one does (for export); refused for SentencePiece, which exports as is.
  std::string hf_tokenizer_json() const;
  // Copies the file into `dir` (created) as tokenizer.model or tokenizer.json,
  // the names load() looks for in a directory, atomically.
  void save_copy(const std::string& dir) const;

  class Model;  // one per kind (tokenizer.cpp)

 private:
  explicit Tokenizer(std::unique_ptr<Model> model);
  // Appends the ids of `text`, its invalid UTF-8 replaced first.
  void append_ids(std::string_view text, std::vector<int>& out) const;
  std::unique_ptr<Model> model_;
};

}  // namespace llm
