// Fuzz target: any bytes through the byte-level BPE of the test fixtures
// (test/data/tokenizers: the tiktoken file, Llama 3's tokenizer.json layout
// and Qwen2's), with the property every such tokenizer must have:
// decode(encode(x)) is x with its invalid UTF-8 replaced, in NFC for Qwen's
// (whose NFC must then be stable: NFC of NFC changes nothing). A difference
// aborts (a finding), as a crash does.
#include <cstdlib>

#include "data/tokenizer.h"
#include "data/tokenizers/unicode_nfc.h"
#include "data/utf8.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  static const Tokenizer tiktoken = Tokenizer::load("test/data/tokenizers/bpe.tiktoken");
  static const Tokenizer json = Tokenizer::load("test/data/tokenizers/tokenizer.json");
  static const Tokenizer qwen2 = Tokenizer::load("test/data/tokenizers/qwen2_tokenizer.json");
  const std::string_view text = fuzz::as_text(data, size);
  const std::string expected = replace_invalid_utf8(text);
  for (const Tokenizer* tokenizer : {&tiktoken, &json}) {
    if (tokenizer->decode(tokenizer->encode(text)) != expected) std::abort();
  }
  const std::string normalized = nfc(expected);
  if (nfc(normalized) != normalized) std::abort();
  if (qwen2.decode(qwen2.encode(text)) != normalized) std::abort();
  return 0;
}
