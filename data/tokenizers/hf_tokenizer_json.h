// A Hugging Face tokenizer.json of the byte-level BPE kind (Llama 3's): a BPE
// model whose vocabulary spells bytes as GPT-2's byte-to-character map does,
// its merges, added special tokens, and a pre-tokenizer that is Llama 3's
// split pattern followed by ByteLevel without its own pattern. Anything else
// (a normalizer, another pattern, dropout, unknown-token fallback) is refused
// naming the file and key: encoding it as if it were Llama 3's would be
// silently wrong.
#pragma once

#include <string>

#include "data/tokenizers/byte_bpe.h"

namespace llm {

ByteBpeVocab read_hf_tokenizer_json(const std::string& path);

}  // namespace llm
