// The byte-level BPE pre-tokenizer of Llama 3 (and OpenAI's cl100k_base):
// splits valid UTF-8 text into the pieces that BPE then encodes one by one,
// as the regular expression
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// matches them leftmost-first, written out as a scanner (the alternatives are
// tried in order at each position; docs/data.md walks through each one).
// Invariant: the pieces are non-empty and concatenate to the text.
#pragma once

#include <string_view>

namespace llm {

// The source text of the pattern above, as tokenizer files spell it.
extern const std::string_view kLlama3SplitPattern;

// Calls piece(std::string_view) for each piece of `text` in order.
template <class OnPiece>
void llama3_split(std::string_view text, OnPiece&& piece);

// The length in bytes of the piece that starts at text[at] (< text.size()).
size_t llama3_piece_length(std::string_view text, size_t at);

template <class OnPiece>
void llama3_split(std::string_view text, OnPiece&& piece) {
  for (size_t at = 0; at < text.size();) {
    const size_t length = llama3_piece_length(text, at);
    piece(text.substr(at, length));
    at += length;
  }
}

}  // namespace llm
