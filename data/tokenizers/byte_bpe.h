// Byte-level BPE, the tokenizer kind of Llama 3 (tiktoken files and Hugging
// Face tokenizer.json) and Qwen2/Qwen3 (tokenizer.json): text is normalized
// to NFC where the file says so (unicode_nfc.h), split into pieces
// (split_pattern.h), each
// piece's bytes start as one token per byte, and the adjacent pair with the
// lowest merge rank is merged, leftmost first, until no pair merges. The two
// file formats differ only in which pairs merge: a tiktoken file lets any
// two tokens whose concatenation is a token merge, at that token's rank; a
// tokenizer.json lists its merges. With whole-piece lookup (tiktoken always,
// tokenizer.json's "ignore_merges") a piece that is a token is that token.
// Invariant: encode gives exactly the reference library's ids for valid
// UTF-8 text; decode(encode(text)) == text (its NFC form where normalized).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizers/split_pattern.h"

namespace llm {

// What a tokenizer file says; the loaders (tiktoken_file.h,
// hf_tokenizer_json.h) fill it.
struct ByteBpeVocab {
  // Pairs of equal rank merge leftmost first (a tiktoken file gives every
  // pair that makes token t the rank t).
  struct Merge {
    int left, right, merged;  // token ids
    int rank;                 // lower merges first
  };
  struct Special {
    std::string text;
    int id;
  };
  std::vector<std::string> tokens;  // id -> bytes, ids 0 .. tokens.size() - 1
  std::vector<Merge> merges;        // a pair listed twice keeps its first rank
  std::vector<Special> specials;    // ids at or above tokens.size()
  bool whole_piece_lookup = true;
  SplitPattern split = SplitPattern::llama3;
  bool nfc = false;  // normalize text to NFC before splitting (Qwen's normalizer)
  // The texts of the specials that begin and end a document; bos is empty
  // for a tokenizer without one (Qwen's documents only end, with EOS).
  std::string bos, eos;
};

class ByteBpe {
 public:
  ByteBpe(ByteBpeVocab vocab, const std::string& origin);

  // Appends the ids of valid UTF-8 `text` (specials' texts are ordinary text).
  void encode(std::string_view text, std::vector<int>& out) const;
  // The bytes of `ids` (a special as its text); ids must be < vocab_size().
  std::string decode(const std::vector<int>& ids) const;

  int vocab_size() const { return vocab_size_; }
  int bos_id() const { return bos_id_; }  // -1 when the vocabulary has no BOS
  int eos_id() const { return eos_id_; }
  // The text of `id`: its bytes, or a special's text.
  const std::string& piece(int id) const { return id_text_[static_cast<size_t>(id)]; }
  // The id of the special token spelled `text`, or -1 when there is none.
  int special_id(std::string_view text) const;

 private:
  void merge_piece(std::string_view piece, std::vector<int>& out) const;

  std::vector<std::string> id_text_;
  std::unordered_map<std::string_view, int> token_of_bytes_;   // views into id_text_
  std::unordered_map<std::string_view, int> special_of_text_;  // views into id_text_
  std::unordered_map<uint64_t, uint64_t> merge_of_pair_;       // (left, right) -> (rank, merged)
  int byte_token_[256];
  bool whole_piece_lookup_;
  SplitPattern split_;
  bool nfc_;
  int vocab_size_ = 0, bos_id_ = -1, eos_id_ = -1;
};

}  // namespace llm
