// Well-formedness per the Unicode standard's table of well-formed UTF-8 byte
// sequences (Table 3-7): the second byte's range depends on the lead byte
// (E0: A0..BF, ED: 80..9F, F0: 90..BF, F4: 80..8F), later bytes are 80..BF.
#include "data/utf8.h"

namespace llm {
namespace {

struct Lead {
  int length;  // 0: not a lead byte
  uint8_t second_low = 0x80, second_high = 0xBF;
};

Lead lead_of(uint8_t byte) {
  if (byte < 0x80) return {1};
  if (byte < 0xC2) return {0};
  if (byte < 0xE0) return {2};
  if (byte == 0xE0) return {3, 0xA0, 0xBF};
  if (byte == 0xED) return {3, 0x80, 0x9F};
  if (byte < 0xF0) return {3};
  if (byte == 0xF0) return {4, 0x90, 0xBF};
  if (byte < 0xF4) return {4};
  if (byte == 0xF4) return {4, 0x80, 0x8F};
  return {0};
}

// Bytes of the well-formed sequence at text[at], or the negated length of
// its maximal ill-formed subpart (at least 1).
int well_formed_length(std::string_view text, size_t at) {
  const Lead lead = lead_of(static_cast<uint8_t>(text[at]));
  if (lead.length == 0) return -1;
  for (int k = 1; k < lead.length; ++k) {
    if (at + k >= text.size()) return -k;
    const auto byte = static_cast<uint8_t>(text[at + k]);
    const uint8_t low = k == 1 ? lead.second_low : 0x80;
    const uint8_t high = k == 1 ? lead.second_high : 0xBF;
    if (byte < low || byte > high) return -k;
  }
  return lead.length;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const int length = well_formed_length(text, at);
    if (length < 0) return false;
    at += static_cast<size_t>(length);
  }
  return true;
}

std::string replace_invalid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const int length = well_formed_length(text, at);
    if (length > 0) {
      out.append(text.substr(at, static_cast<size_t>(length)));
      at += static_cast<size_t>(length);
    } else {
      out.append("\xEF\xBF\xBD");
      at += static_cast<size_t>(-length);
    }
  }
  return out;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace llm
