// SentencePiece behind a small interface; SentencePiece's status errors become
// llm::Error naming the model file.
#include "data/tokenizer.h"

#include <sentencepiece_processor.h>

#include "runtime/error.h"

namespace llm {

Tokenizer::Tokenizer() : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& path) {
  Tokenizer tokenizer;
  tokenizer.path_ = path;
  const auto status = tokenizer.processor_->Load(path);
  LLM_CHECK(status.ok(), "tokenizer {}: cannot load: {}", path, status.ToString());
  return tokenizer;
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  LLM_CHECK(status.ok(), "tokenizer {}: encode failed: {}", path_, status.ToString());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  const int size = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    LLM_CHECK(ids[i] >= 0 && ids[i] < size,
              "tokenizer {}: cannot decode id {} at position {}: vocab size is {}", path_, ids[i],
              i, size);
  }
  std::string text;
  const auto status = processor_->Decode(ids, &text);
  LLM_CHECK(status.ok(), "tokenizer {}: decode failed: {}", path_, status.ToString());
  return text;
}

int Tokenizer::vocab_size() const { return processor_->GetPieceSize(); }

int Tokenizer::bos_id() const { return processor_->bos_id(); }
int Tokenizer::eos_id() const { return processor_->eos_id(); }
int Tokenizer::unk_id() const { return processor_->unk_id(); }
std::string Tokenizer::piece(int id) const {
  LLM_CHECK(id >= 0 && id < vocab_size(), "tokenizer {}: no piece {} (vocab size {})", path_, id,
            vocab_size());
  return processor_->IdToPiece(id);
}

}  // namespace llm
