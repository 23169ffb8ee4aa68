// NFC by UAX #15's three steps (full canonical decomposition, canonical
// ordering, canonical composition), run only over the stretches of text that
// may change. A code point is inert when it is a starter that NFC leaves as
// it is, whose full decomposition starts with a starter, and that composes
// with nothing before it (in Unicode's terms: ccc 0 and NFC_Quick_Check Yes):
// nothing reorders or composes across it, so the text splits before each
// inert code point into pieces normalized one by one, and a piece of inert
// code points alone (most text: ASCII, precomposed letters, CJK, Hangul
// syllables) is copied as is.
#include "data/tokenizers/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "data/tokenizers/unicode_nfc_tables.h"
#include "data/utf8.h"

namespace llm {
namespace {

using unicode_nfc::CombiningClassRange;
using unicode_nfc::Composition;
using unicode_nfc::Decomposition;
using unicode_nfc::kCombiningClasses;
using unicode_nfc::kCombiningClassesCount;
using unicode_nfc::kCompositions;
using unicode_nfc::kCompositionsCount;
using unicode_nfc::kDecompositions;
using unicode_nfc::kDecompositionsCount;

// Hangul syllables and jamo, by the arithmetic of the Unicode standard's
// section 3.12: a syllable is L V or L V T.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kSCount = kLCount * kVCount * kTCount;

bool is_hangul_syllable(uint32_t cp) { return cp >= kSBase && cp < kSBase + kSCount; }
bool is_hangul_vowel(uint32_t cp) { return cp >= kVBase && cp < kVBase + kVCount; }
bool is_hangul_trailing(uint32_t cp) { return cp > kTBase && cp < kTBase + kTCount; }

uint8_t combining_class(uint32_t cp) {
  const CombiningClassRange* end = kCombiningClasses + kCombiningClassesCount;
  const CombiningClassRange* after = std::upper_bound(
      kCombiningClasses, end, cp,
      [](uint32_t value, const CombiningClassRange& range) { return value < range.first; });
  if (after == kCombiningClasses) return 0;
  const CombiningClassRange& range = after[-1];
  return cp <= range.last ? range.ccc : 0;
}

const Decomposition* decomposition_of(uint32_t cp) {
  const Decomposition* end = kDecompositions + kDecompositionsCount;
  const Decomposition* found = std::lower_bound(
      kDecompositions, end, cp,
      [](const Decomposition& entry, uint32_t value) { return entry.code_point < value; });
  return found != end && found->code_point == cp ? found : nullptr;
}

// The primary composite of `first` then `second`, or 0 when there is none.
uint32_t composite_of(uint32_t first, uint32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && is_hangul_vowel(second)) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (is_hangul_syllable(first) && (first - kSBase) % kTCount == 0 && is_hangul_trailing(second)) {
    return first + (second - kTBase);
  }
  const Composition* end = kCompositions + kCompositionsCount;
  const Composition* found =
      std::lower_bound(kCompositions, end, Composition{first, second, 0},
                       [](const Composition& a, const Composition& b) {
                         return a.first != b.first ? a.first < b.first : a.second < b.second;
                       });
  return found != end && found->first == first && found->second == second ? found->composite : 0;
}

struct Char {
  uint32_t code_point;
  uint8_t ccc;
};

void append_decomposed(uint32_t cp, std::vector<Char>& out) {
  if (is_hangul_syllable(cp)) {
    const uint32_t index = cp - kSBase;
    out.push_back({kLBase + index / (kVCount * kTCount), 0});
    out.push_back({kVBase + index % (kVCount * kTCount) / kTCount, 0});
    if (index % kTCount != 0) out.push_back({kTBase + index % kTCount, 0});
    return;
  }
  // The tables are finite and acyclic: this recursion ends within a few levels.
  if (const Decomposition* mapping = decomposition_of(cp)) {
    append_decomposed(mapping->first, out);
    if (mapping->second != 0) append_decomposed(mapping->second, out);
    return;
  }
  out.push_back({cp, combining_class(cp)});
}

// Appends the NFC form of `piece` to `out`; `chars` is scratch space.
void append_normalized(std::string_view piece, std::vector<Char>& chars, std::string& out) {
  chars.clear();
  for (size_t at = 0; at < piece.size();) {
    const CodePoint cp = next_code_point(piece, at);
    append_decomposed(cp.value, chars);
    at += static_cast<size_t>(cp.length);
  }
  // Canonical ordering: each run of non-starters sorted stably by class
  // (short runs, the usual ones, by insertion: stable_sort may allocate).
  const auto by_class = [](const Char& a, const Char& b) { return a.ccc < b.ccc; };
  for (size_t i = 0; i < chars.size();) {
    size_t end = i;
    while (end < chars.size() && chars[end].ccc != 0) ++end;
    if (end - i > 16) {
      std::stable_sort(chars.begin() + static_cast<ptrdiff_t>(i),
                       chars.begin() + static_cast<ptrdiff_t>(end), by_class);
    } else {
      for (size_t k = i + 1; k < end; ++k) {
        for (size_t j = k; j > i && by_class(chars[j], chars[j - 1]); --j) {
          std::swap(chars[j], chars[j - 1]);
        }
      }
    }
    i = std::max(end, i + 1);
  }
  // Canonical composition: a character joins the last starter unless a
  // character kept between them has class 0 or one at least its own (those
  // kept since the starter are non-starters in ascending class order).
  size_t starter = 0, kept = 0;
  bool has_starter = false;
  for (const Char& c : chars) {
    if (has_starter && (kept == starter + 1 || chars[kept - 1].ccc < c.ccc)) {
      if (const uint32_t composite = composite_of(chars[starter].code_point, c.code_point)) {
        chars[starter].code_point = composite;
        continue;
      }
    }
    if (c.ccc == 0) {
      starter = kept;
      has_starter = true;
    }
    chars[kept++] = c;
  }
  for (size_t i = 0; i < kept; ++i) append_utf8(chars[i].code_point, out);
}

// The code points that are not inert, as a bit set built once from the
// tables: those of a nonzero class, the second ones of composites (Hangul
// vowels and trailing consonants too), and the decomposable ones that NFC
// does not leave alone or whose decomposition starts with one of those.
class NonInertSet {
 public:
  NonInertSet() {
    for (size_t i = 0; i < kCombiningClassesCount; ++i) {
      for (uint32_t cp = kCombiningClasses[i].first; cp <= kCombiningClasses[i].last; ++cp) add(cp);
    }
    for (size_t i = 0; i < kCompositionsCount; ++i) add(kCompositions[i].second);
    for (uint32_t cp = kVBase; cp < kVBase + kVCount; ++cp) add(cp);
    for (uint32_t cp = kTBase + 1; cp < kTBase + kTCount; ++cp) add(cp);
    // Decomposable code points, not yet in the set, are judged by the first
    // code point of their full decomposition, which has none itself.
    std::vector<uint32_t> changing;
    std::vector<Char> scratch;
    for (size_t i = 0; i < kDecompositionsCount; ++i) {
      const uint32_t cp = kDecompositions[i].code_point;
      uint32_t first = cp;
      while (const Decomposition* mapping = decomposition_of(first)) first = mapping->first;
      std::string alone, normalized;
      append_utf8(cp, alone);
      append_normalized(alone, scratch, normalized);
      if (contains(first) || normalized != alone) changing.push_back(cp);
    }
    for (const uint32_t cp : changing) add(cp);
  }
  bool contains(uint32_t cp) const {
    return cp / 64 < words_.size() && (words_[cp / 64] >> (cp % 64) & 1) != 0;
  }

 private:
  void add(uint32_t cp) {
    if (cp / 64 >= words_.size()) words_.resize(cp / 64 + 1);
    words_[cp / 64] |= uint64_t{1} << (cp % 64);
  }
  std::vector<uint64_t> words_;
};

const NonInertSet& non_inert() {
  static const NonInertSet set;
  return set;
}

}  // namespace

std::string nfc(std::string_view valid_utf8) {
  const std::string_view text = valid_utf8;
  if (std::all_of(text.begin(), text.end(),
                  [](char c) { return static_cast<uint8_t>(c) < 0x80; })) {
    return std::string(text);
  }
  const NonInertSet& set = non_inert();
  std::string out;
  out.reserve(text.size());
  std::vector<Char> chars;
  size_t written = 0;     // text[0, written) is in `out`
  size_t last_inert = 0;  // where the last inert code point starts
  bool changing = false;  // whether text[written, at) holds a non-inert code point
  for (size_t at = 0; at < text.size();) {
    const CodePoint cp = next_code_point(text, at);
    if (!set.contains(cp.value)) {
      if (changing) {
        append_normalized(text.substr(written, at - written), chars, out);
        written = at;
        changing = false;
      }
      last_inert = at;
    } else if (!changing) {
      out.append(text.substr(written, last_inert - written));
      written = last_inert;
      changing = true;
    }
    at += static_cast<size_t>(cp.length);
  }
  if (changing) {
    append_normalized(text.substr(written), chars, out);
  } else {
    out.append(text.substr(written));
  }
  return out;
}

}  // namespace llm
