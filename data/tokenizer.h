// A thin wrapper over a SentencePiece model (data/prepare.cpp trains one).
// Invariant: a Tokenizer that loaded holds a valid model; ids it returns are in
// [0, vocab_size()).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace llm {

class Tokenizer {
 public:
  static Tokenizer load(const std::string& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;
  int vocab_size() const;
  // Special ids, -1 when the model has none.
  int bos_id() const;
  int eos_id() const;
  int unk_id() const;
  std::string piece(int id) const;  // the text of id (e.g. "<s>")
  const std::string& path() const { return path_; }

 private:
  Tokenizer();

  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace llm
