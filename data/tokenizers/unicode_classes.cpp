// char_class through a two-level table: 4352 pages of 256 code points, each
// page an index into the distinct 256-entry blocks, built once from the
// generated ranges.
#include "data/tokenizers/unicode_classes.h"

#include <array>
#include <map>
#include <vector>

namespace llm {
namespace {

constexpr uint32_t kCodePoints = 0x110000;
constexpr uint32_t kPage = 256;

struct ClassTable {
  std::vector<uint16_t> page_block;  // page -> block
  std::vector<std::array<CharClass, kPage>> blocks;

  ClassTable() {
    std::vector<CharClass> classes(kCodePoints, CharClass::other);
    auto mark = [&](const CodePointRange* ranges, size_t count, CharClass value) {
      for (size_t r = 0; r < count; ++r) {
        for (uint32_t cp = ranges[r].low; cp <= ranges[r].high; ++cp) classes[cp] = value;
      }
    };
    using namespace unicode_ranges;
    mark(kLetterRanges, kLetterRangesCount, CharClass::letter);
    mark(kNumberRanges, kNumberRangesCount, CharClass::number);
    mark(kSpaceRanges, kSpaceRangesCount, CharClass::space);
    std::map<std::array<CharClass, kPage>, uint16_t> seen;
    page_block.resize(kCodePoints / kPage);
    for (uint32_t page = 0; page < kCodePoints / kPage; ++page) {
      std::array<CharClass, kPage> block;
      for (uint32_t i = 0; i < kPage; ++i) block[i] = classes[page * kPage + i];
      auto [it, added] = seen.emplace(block, static_cast<uint16_t>(blocks.size()));
      if (added) blocks.push_back(block);
      page_block[page] = it->second;
    }
  }
};

const ClassTable& class_table() {
  static const ClassTable table;
  return table;
}

}  // namespace

CharClass char_class(uint32_t code_point) {
  if (code_point >= kCodePoints) return CharClass::other;
  const ClassTable& table = class_table();
  return table.blocks[table.page_block[code_point / kPage]][code_point % kPage];
}

}  // namespace llm
