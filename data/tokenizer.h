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
  int bos_id() const;
  const std::string& path() const { return path_; }

 private:
  Tokenizer();

  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace llm
