// Tokenizer: the kind is found from the file (a tiktoken file is text whose
// first line is base64 and a rank; a SentencePiece model is a protobuf), then
// each kind is a Model. SentencePiece's status errors become llm::Error
// naming the file.
#include "data/tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <fstream>

#include "data/tokenizers/byte_bpe.h"
#include "data/tokenizers/hf_tokenizer_json.h"
#include "data/tokenizers/tiktoken_file.h"
#include "data/utf8.h"
#include "base/error.h"
#include "base/file_io.h"

namespace llm {
namespace fs = std::filesystem;

const char* to_string(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::sentencepiece:
      return "SentencePiece";
    case TokenizerKind::tiktoken:
      return "tiktoken BPE";
    case TokenizerKind::hf_tokenizer_json:
      return "Hugging Face tokenizer.json";
  }
  return "?";
}

class Tokenizer::Model {
 public:
  Model(std::string path, TokenizerKind kind) : path_(std::move(path)), kind_(kind) {}
  virtual ~Model() = default;
  // `text` is valid UTF-8.
  virtual void encode(std::string_view text, std::vector<int>& out) const = 0;
  virtual std::string decode(const std::vector<int>& ids) const = 0;
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  virtual int unk_id() const { return -1; }
  virtual std::string hf_tokenizer_json() const {
    LLM_FAIL("tokenizer {}: a {} has no tokenizer.json form", path_, to_string(kind_));
  }
  virtual std::string piece(int id) const = 0;
  virtual int special_id(std::string_view text) const = 0;
  const std::string& path() const { return path_; }
  TokenizerKind kind() const { return kind_; }

 private:
  std::string path_;
  TokenizerKind kind_;
};

namespace {

class SentencePieceModel final : public Tokenizer::Model {
 public:
  explicit SentencePieceModel(const std::string& path) : Model(path, TokenizerKind::sentencepiece) {
    const auto status = processor_.Load(path);
    LLM_CHECK(status.ok(), "tokenizer {}: cannot load: {}", path, status.ToString());
  }
  void encode(std::string_view text, std::vector<int>& out) const override {
    std::vector<int> ids;
    const auto status = processor_.Encode(text, &ids);
    LLM_CHECK(status.ok(), "tokenizer {}: encode failed: {}", path(), status.ToString());
    out.insert(out.end(), ids.begin(), ids.end());
  }
  std::string decode(const std::vector<int>& ids) const override {
    std::string text;
    const auto status = processor_.Decode(ids, &text);
    LLM_CHECK(status.ok(), "tokenizer {}: decode failed: {}", path(), status.ToString());
    return text;
  }
  int vocab_size() const override { return processor_.GetPieceSize(); }
  int bos_id() const override { return processor_.bos_id(); }
  int eos_id() const override { return processor_.eos_id(); }
  int unk_id() const override { return processor_.unk_id(); }
  std::string piece(int id) const override { return processor_.IdToPiece(id); }
  int special_id(std::string_view text) const override {
    const int id = processor_.PieceToId(text);  // unk_id when there is no such piece
    return processor_.IsControl(id) && processor_.IdToPiece(id) == text ? id : -1;
  }

 private:
  sentencepiece::SentencePieceProcessor processor_;
};

class ByteBpeModel final : public Tokenizer::Model {
 public:
  ByteBpeModel(const std::string& path, TokenizerKind kind, ByteBpeVocab vocab)
      : Model(path, kind), vocab_(vocab), bpe_(std::move(vocab), path) {}
  std::string hf_tokenizer_json() const override { return hf_tokenizer_json_text(vocab_); }
  void encode(std::string_view text, std::vector<int>& out) const override {
    bpe_.encode(text, out);
  }
  std::string decode(const std::vector<int>& ids) const override {
    return replace_invalid_utf8(bpe_.decode(ids));
  }
  int vocab_size() const override { return bpe_.vocab_size(); }
  int bos_id() const override { return bpe_.bos_id(); }
  int eos_id() const override { return bpe_.eos_id(); }
  std::string piece(int id) const override { return bpe_.piece(id); }
  int special_id(std::string_view text) const override { return bpe_.special_id(text); }

 private:
  ByteBpeVocab vocab_;  // what the file said, for its tokenizer.json form
  ByteBpe bpe_;
};

std::string file_head(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LLM_CHECK(in, "tokenizer {}: cannot open", path);
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

std::unique_ptr<Tokenizer::Model> load_file(const std::string& path) {
  if (fs::path(path).extension() == ".json") {
    return std::make_unique<ByteBpeModel>(path, TokenizerKind::hf_tokenizer_json,
                                          read_hf_tokenizer_json(path));
  }
  if (looks_like_tiktoken_file(file_head(path))) {
    return std::make_unique<ByteBpeModel>(path, TokenizerKind::tiktoken, read_tiktoken_file(path));
  }
  return std::make_unique<SentencePieceModel>(path);
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Model> model) : model_(std::move(model)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& path) {
  LLM_CHECK(fs::exists(path), "tokenizer {}: no such file or directory", path);
  if (!fs::is_directory(path)) return Tokenizer(load_file(path));
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    const fs::path candidate = fs::path(path) / name;
    if (fs::is_regular_file(candidate)) return Tokenizer(load_file(candidate.string()));
  }
  LLM_FAIL("tokenizer {}: the directory has neither tokenizer.model nor tokenizer.json", path);
}

void Tokenizer::append_ids(std::string_view text, std::vector<int>& out) const {
  if (is_valid_utf8(text))
    model_->encode(text, out);
  else
    model_->encode(replace_invalid_utf8(text), out);
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  append_ids(text, ids);
  return ids;
}

void Tokenizer::encode_document(std::string_view text, std::vector<int>& out) const {
  if (bos_id() >= 0) out.push_back(bos_id());
  append_ids(text, out);
  out.push_back(eos_id());
}

std::string Tokenizer::hf_tokenizer_json() const { return model_->hf_tokenizer_json(); }

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  const int size = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    LLM_CHECK(ids[i] >= 0 && ids[i] < size,
              "tokenizer {}: cannot decode id {} at position {}: vocab size is {}", path(), ids[i],
              i, size);
  }
  return model_->decode(ids);
}

int Tokenizer::vocab_size() const { return model_->vocab_size(); }
int Tokenizer::bos_id() const { return model_->bos_id(); }
int Tokenizer::eos_id() const { return model_->eos_id(); }
DocumentBoundary Tokenizer::document_boundary() const {
  return bos_id() >= 0 ? DocumentBoundary{bos_id(), /*token_ends_document=*/false}
                       : DocumentBoundary{eos_id(), /*token_ends_document=*/true};
}
int Tokenizer::unk_id() const { return model_->unk_id(); }
std::string Tokenizer::piece(int id) const {
  LLM_CHECK(id >= 0 && id < vocab_size(), "tokenizer {}: no piece {} (vocab size {})", path(), id,
            vocab_size());
  return model_->piece(id);
}
void Tokenizer::save_copy(const std::string& dir) const {
  fs::create_directories(dir);
  const char* name =
      kind() == TokenizerKind::hf_tokenizer_json ? "tokenizer.json" : "tokenizer.model";
  write_file_atomically((fs::path(dir) / name).string(), read_file(path()));
}

std::string run_tokenizer_dir(const std::string& run_dir) {
  return (fs::path(run_dir) / "tokenizer").string();
}

int Tokenizer::special_id(std::string_view text) const { return model_->special_id(text); }

TokenizerKind Tokenizer::kind() const { return model_->kind(); }
const std::string& Tokenizer::path() const { return model_->path(); }

}  // namespace llm
