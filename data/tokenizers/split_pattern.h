// The byte-level BPE pre-tokenizers of Llama 3 (and OpenAI's cl100k_base) and
// of Qwen2/Qwen3: they split valid UTF-8 text into the pieces that BPE then
// encodes one by one, as the regular expression
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// matches them leftmost-first; Qwen's pattern is the same with \p{N} (one
// digit a piece) for \p{N}{1,3}. Written out as a scanner (the alternatives
// are tried in order at each position; docs/data.md walks through each one).
// Invariant: the pieces are non-empty and concatenate to the text.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace llm {

enum class SplitPattern : uint8_t { llama3, qwen2 };

// The source text of the pattern, as tokenizer files spell it.
std::string_view split_pattern_text(SplitPattern pattern);
// The pattern a tokenizer file spells `text`, if it is one of ours.
std::optional<SplitPattern> split_pattern_of(std::string_view text);

// The length in bytes of the piece that starts at text[at] (< text.size()).
size_t split_piece_length(std::string_view text, size_t at, SplitPattern pattern);

// Calls piece(std::string_view) for each piece of `text` in order.
template <class OnPiece>
void split_pieces(std::string_view text, SplitPattern pattern, OnPiece&& piece) {
  for (size_t at = 0; at < text.size();) {
    const size_t length = split_piece_length(text, at, pattern);
    piece(text.substr(at, length));
    at += length;
  }
}

}  // namespace llm
