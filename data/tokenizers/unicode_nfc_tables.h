// The generated tables of NFC (unicode_nfc_tables.cpp, made by
// tools/make_nfc_tables.py), for unicode_nfc.cpp: Unicode's tables cut down to
// the code points of kUnicodeAgeLimit, as the reference library's. Invariant:
// each table is sorted ascending by its first column(s), for binary search.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llm::unicode_nfc {

// The Unicode version whose code points the tables hold, e.g. "9.0".
extern const char kUnicodeAgeLimit[];

// Code points first..last (inclusive) have canonical combining class `ccc`;
// code points in no range have class 0.
struct CombiningClassRange {
  uint32_t first, last;
  uint8_t ccc;
};
extern const CombiningClassRange kCombiningClasses[];
extern const size_t kCombiningClassesCount;

// The canonical decomposition mapping of `code_point` (Hangul syllables
// aside): `first`, then `second` unless it is 0. Decompose both again for
// the full decomposition.
struct Decomposition {
  uint32_t code_point, first, second;
};
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionsCount;

// Primary composites: `first` then `second` compose to `composite`.
struct Composition {
  uint32_t first, second, composite;
};
extern const Composition kCompositions[];
extern const size_t kCompositionsCount;

}  // namespace llm::unicode_nfc
