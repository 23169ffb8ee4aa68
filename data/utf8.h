// UTF-8 as the tokenizers see it. Text from disk may hold any bytes; every
// tokenizer encodes valid UTF-8 only, after invalid sequences are replaced by
// U+FFFD one per maximal ill-formed subpart (Unicode 3.9, "U+FFFD substitution
// of maximal subparts"), which is what Python's bytes.decode("utf-8",
// errors="replace") does: so the reference libraries, fed that string, see
// the same text as we do.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace llm {

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code
// points above U+10FFFF).
bool is_valid_utf8(std::string_view text);

// `text` with each maximal ill-formed subpart replaced by U+FFFD (EF BF BD);
// valid text comes back unchanged.
std::string replace_invalid_utf8(std::string_view text);

// Appends the UTF-8 encoding of code point `cp` (at most U+10FFFF, not a
// surrogate).
void append_utf8(uint32_t cp, std::string& out);

// The code point starting at text[at] of valid UTF-8 text, and its length.
struct CodePoint {
  uint32_t value;
  int length;
};
inline CodePoint next_code_point(std::string_view text, size_t at) {
  const auto byte = [&](size_t k) {
    return static_cast<uint32_t>(static_cast<uint8_t>(text[at + k]));
  };
  const uint32_t lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  if (lead < 0xE0) return {((lead & 0x1F) << 6) | (byte(1) & 0x3F), 2};
  if (lead < 0xF0) return {((lead & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F), 3};
  return {
      ((lead & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F),
      4};
}

}  // namespace llm
