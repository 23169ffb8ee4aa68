// The Unicode classes of the byte-level BPE pre-tokenizer's pattern: letters
// (\p{L}), numbers (\p{N}), white space (\s), else other. Invariant: one
// lookup is two array reads (a page table built once from the generated
// ranges of unicode_ranges.cpp, tools/make_unicode_tables.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace llm {

enum class CharClass : uint8_t { other, letter, number, space };

CharClass char_class(uint32_t code_point);

struct CodePointRange {
  uint32_t low, high;  // inclusive
};

namespace unicode_ranges {
extern const CodePointRange kLetterRanges[];
extern const size_t kLetterRangesCount;
extern const CodePointRange kNumberRanges[];
extern const size_t kNumberRangesCount;
extern const CodePointRange kSpaceRanges[];
extern const size_t kSpaceRangesCount;
}  // namespace unicode_ranges

}  // namespace llm
