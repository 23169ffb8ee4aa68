// Unicode Normalization Form C (UAX #15) as Hugging Face tokenizers' "NFC"
// normalizer does it (Qwen2/Qwen3's tokenizer.json): with the tables of
// Unicode 9.0, its library's, so code points assigned later pass unchanged
// and compose with nothing (unicode_nfc_tables.h).
#pragma once

#include <string>
#include <string_view>

namespace llm {

// The NFC form of `valid_utf8`, which must be well-formed UTF-8
// (is_valid_utf8); text that NFC leaves alone comes back byte for byte.
std::string nfc(std::string_view valid_utf8);

}  // namespace llm
