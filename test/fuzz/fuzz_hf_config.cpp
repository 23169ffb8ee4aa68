// Fuzz target: a Hugging Face config.json, read into a model config and its
// context length, and checked against a tokenizer's document tokens, as
// init_from and generate do.
#include "fuzz_support.h"
#include "interop/hf_llama.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  fuzz::reset_scratch();
  const std::string path = fuzz::write("config.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] { hf_read_config(path); });
  fuzz::expect_clean([&] { hf_read_context_length(path); });
  fuzz::expect_clean([&] { hf_check_document_tokens(path, "tokenizer", 1, 2); });
  return 0;
}
