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

// `vocab` as a tokenizer.json of that same kind, which read_hf_tokenizer_json
// reads back to the same encoder and Hugging Face's tokenizers encodes with
// the same ids: merges in rank order, whole-piece lookup as ignore_merges,
// and a post-processor that adds BOS as training did.
std::string hf_tokenizer_json_text(const ByteBpeVocab& vocab);

}  // namespace llm
