// Where packed documents meet in a token stream. A tokenizer with a BOS
// starts each document with it (Llama); one without (Qwen) only ends each
// with EOS, and the next document starts after it. Document masking
// (model/transformer.h) and the loader's dropped targets (data/loader.h)
// both find documents through this one rule.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llm {

struct DocumentBoundary {
  int32_t token = -1;                // BOS, or EOS when token_ends_document
  bool token_ends_document = false;  // the document after it starts past it

  // Whether a new document starts at row[t], for 0 < t < the row's length
  // (a row's first token always starts one).
  bool starts_at(const int32_t* row, size_t t) const {
    return token_ends_document ? row[t - 1] == token : row[t] == token;
  }
};

}  // namespace llm
