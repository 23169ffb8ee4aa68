// Fuzz target: the tokenizer files the project reads (tokenizer.json, a
// tiktoken BPE file, a SentencePiece model), chosen by the input's first
// byte; a tokenizer that loads then encodes and decodes a varied text.
#include "data/tokenizer.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  if (size == 0) return 0;
  static const char* kNames[] = {"tokenizer.json", "tokenizer.model", "spm.model"};
  fuzz::reset_scratch();
  const std::string path = fuzz::write(kNames[data[0] % 3], fuzz::as_text(data + 1, size - 1));
  fuzz::expect_clean([&] {
    const Tokenizer tokenizer = Tokenizer::load(path);
    const std::vector<int> ids =
        tokenizer.encode("Hello world! 1234 caf\xC3\xA9 \xE6\x97\xA5 \n\t x");
    tokenizer.decode(ids);
    if (tokenizer.kind() != TokenizerKind::sentencepiece) tokenizer.hf_tokenizer_json();
  });
  return 0;
}
