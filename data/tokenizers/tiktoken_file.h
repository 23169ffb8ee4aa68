// tiktoken's BPE file format, Llama 3's tokenizer.model: one line per token,
// the token's bytes in base64, a space, its rank (ranks 0 .. n-1, each once).
// The special tokens are not in the file: Llama 3's 256 follow the ranks
// (<|begin_of_text|> = n, <|end_of_text|> = n + 1, ...), and documents are
// bracketed by those two. Errors name the file and line.
#pragma once

#include <string>
#include <string_view>

#include "data/tokenizers/byte_bpe.h"

namespace llm {

ByteBpeVocab read_tiktoken_file(const std::string& path);

// Whether a file that starts with `head` is in this format (its first line
// is base64, a space and a number), as opposed to a SentencePiece protobuf.
bool looks_like_tiktoken_file(std::string_view head);

}  // namespace llm
