// Fuzz target: prepare's inputs through DocumentReader: the input's first
// byte picks the file's kind (JSON Lines, JSON, plain text, each possibly
// gzip-compressed by name only, which zlib then reads as it is) and whether
// records without the text field are skipped; every document is read.
#include <vector>

#include "data/document_reader.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llm;
  if (size == 0) return 0;
  static const char* kNames[] = {"a.jsonl", "a.json", "a.txt", "a.jsonl.gz", "a.json.gz", "a.gz"};
  fuzz::reset_scratch();
  const std::string path = fuzz::write(kNames[data[0] % 6], fuzz::as_text(data + 1, size - 1));
  fuzz::expect_clean([&] {
    DocumentReader reader({path}, {"text", (data[0] & 0x80) != 0});
    std::vector<std::string> documents;
    while (reader.next_batch(4096, documents)) documents.clear();
  });
  return 0;
}
