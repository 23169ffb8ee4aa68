// NFC (data/tokenizers/unicode_nfc.h) against Unicode's conformance file
// NormalizationTest.txt (Debian's unicode-data, read through bzcat), held to
// its invariants on the lines whose characters Unicode had assigned by the
// tables' age limit (DerivedAge.txt): Hugging Face tokenizers, the reference,
// normalizes with Unicode 9.0's tables, so newer characters pass unchanged and
// compose with nothing, and the file's expectations for them are not its.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/tokenizers/unicode_nfc.h"
#include "data/tokenizers/unicode_nfc_tables.h"
#include "data/utf8.h"

namespace llm {
namespace {

constexpr char kNormalizationTest[] = "/usr/share/unicode/NormalizationTest.txt.bz2";
constexpr char kDerivedAge[] = "/usr/share/unicode/DerivedAge.txt";
constexpr uint32_t kCodePoints = 0x110000;

std::string utf8_of(const std::vector<uint32_t>& code_points) {
  std::string out;
  for (const uint32_t cp : code_points) append_utf8(cp, out);
  return out;
}

bool is_surrogate(uint32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

// Unicode versions as major * 100 + minor.
int version_of(const std::string& text) {
  const size_t dot = text.find('.');
  return std::stoi(text.substr(0, dot)) * 100 + std::stoi(text.substr(dot + 1));
}

// Whether each code point was assigned by the tables' age limit.
std::vector<bool> read_old_enough() {
  const int limit = version_of(unicode_nfc::kUnicodeAgeLimit);
  std::vector<bool> old_enough(kCodePoints, false);
  std::ifstream in(kDerivedAge);
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    const size_t semicolon = line.find(';');
    if (semicolon == std::string::npos) continue;
    const size_t dots = line.find("..");
    const uint32_t first = std::stoul(line.substr(0, std::min(dots, semicolon)), nullptr, 16);
    const uint32_t last = dots < semicolon ? std::stoul(line.substr(dots + 2), nullptr, 16) : first;
    if (version_of(line.substr(semicolon + 1)) > limit) continue;
    for (uint32_t cp = first; cp <= last; ++cp) old_enough[cp] = true;
  }
  return old_enough;
}

// One data line of NormalizationTest.txt: its part and the code points of
// its five columns c1..c5.
struct TestLine {
  int part;
  std::vector<uint32_t> columns[5];
};

std::vector<TestLine> read_normalization_test() {
  std::vector<TestLine> lines;
  FILE* pipe = popen((std::string("bzcat ") + kNormalizationTest).c_str(), "r");
  if (pipe == nullptr) return lines;
  std::string text;
  char buffer[1 << 16];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
  if (pclose(pipe) != 0) return {};
  std::istringstream in(text);
  std::string line;
  int part = -1;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    if (line.rfind("@Part", 0) == 0) {
      part = std::stoi(line.substr(5));
      continue;
    }
    if (line.find(';') == std::string::npos) continue;
    TestLine& parsed = lines.emplace_back(TestLine{part, {}});
    std::istringstream fields(line);
    std::string field;
    for (auto& column : parsed.columns) {
      std::getline(fields, field, ';');
      std::istringstream hex(field);
      for (std::string word; hex >> word;) column.push_back(std::stoul(word, nullptr, 16));
    }
  }
  return lines;
}

TEST(UnicodeNfc, NormalizesHandPickedCases) {
  EXPECT_EQ(nfc(""), "");
  EXPECT_EQ(nfc("plain ASCII, unchanged\n"), "plain ASCII, unchanged\n");
  EXPECT_EQ(nfc("e\u0301"), "\u00E9");
  EXPECT_EQ(nfc("\u212B"), "\u00C5");  // ANGSTROM SIGN: a singleton decomposition
  // Hangul jamo L V T compose to a syllable, and an LV syllable takes a T.
  EXPECT_EQ(nfc("\u1100\u1161\u11A8"), "\uAC01");
  EXPECT_EQ(nfc("\uAC00\u11A8"), "\uAC01");
  // Two marks of classes 230 and 220 reorder; x composes with neither.
  EXPECT_EQ(nfc("x\u0301\u0323"), "x\u0323\u0301");
  // The same marks after an a: it takes the dot below, and no letter is a
  // with dot below and acute.
  EXPECT_EQ(nfc("a\u0301\u0323"), "\u1EA1\u0301");
  // Composed text comes back as it was; the pieces around a change too.
  EXPECT_EQ(nfc("na\u00EFve \u65E5\u672C \uD55C\uAD6D\uC5B4"),
            "na\u00EFve \u65E5\u672C \uD55C\uAD6D\uC5B4");
  EXPECT_EQ(nfc("caf\u0065\u0301 \u00E0 la cr\u00E8me"), "caf\u00E9 \u00E0 la cr\u00E8me");
}

TEST(UnicodeNfc, LeavesCharactersNewerThanItsTablesAlone) {
  // U+1DFA (Unicode 14.0, class 218 there) is a starter to the reference:
  // it blocks the acute from the a, where Unicode 14.0 would compose them.
  EXPECT_EQ(nfc("a\u1DFA\u0301"), "a\u1DFA\u0301");
  // U+11938 (13.0) is U+11935 U+11930 canonically; the reference neither
  // composes the pair nor decomposes it.
  EXPECT_EQ(nfc("\U00011935\U00011930"), "\U00011935\U00011930");
  EXPECT_EQ(nfc("\U00011938"), "\U00011938");
}

TEST(UnicodeNfc, PassesNormalizationTestForCharactersOfItsTables) {
  ASSERT_TRUE(std::filesystem::exists(kNormalizationTest) && std::filesystem::exists(kDerivedAge))
      << "missing " << kNormalizationTest << " or " << kDerivedAge
      << ": run make deps (Debian packages unicode-data and bzip2)";
  const std::vector<bool> old_enough = read_old_enough();
  const std::vector<TestLine> lines = read_normalization_test();
  ASSERT_GT(lines.size(), 18000u) << "could not read " << kNormalizationTest << " through bzcat";

  std::vector<bool> in_part1(kCodePoints, false);
  size_t held = 0, newer = 0;
  for (const TestLine& line : lines) {
    if (line.part == 1) in_part1[line.columns[0][0]] = true;
    bool old = true;
    for (const auto& column : line.columns) {
      for (const uint32_t cp : column) old = old && old_enough[cp];
    }
    std::string c[5];
    for (int k = 0; k < 5; ++k) c[k] = utf8_of(line.columns[k]);
    if (old) {
      ++held;
      EXPECT_EQ(nfc(c[0]), c[1]) << "c2 == NFC(c1): " << c[0];
      EXPECT_EQ(nfc(c[1]), c[1]) << "c2 == NFC(c2): " << c[1];
      EXPECT_EQ(nfc(c[2]), c[1]) << "c2 == NFC(c3): " << c[2];
      EXPECT_EQ(nfc(c[3]), c[3]) << "c4 == NFC(c4): " << c[3];
      EXPECT_EQ(nfc(c[4]), c[3]) << "c4 == NFC(c5): " << c[4];
    } else {
      // Newer characters are inert starters to the reference, so text that
      // is NFC by a later version stays NFC; the rest of the line is not its.
      ++newer;
      EXPECT_EQ(nfc(c[1]), c[1]) << "c2 == NFC(c2), newer characters: " << c[1];
      EXPECT_EQ(nfc(c[3]), c[3]) << "c4 == NFC(c4), newer characters: " << c[3];
    }
  }
  EXPECT_GT(held, 17000u);
  EXPECT_GT(newer, 0u);

  // Every code point not in Part 1, and every one newer than the tables,
  // normalizes to itself.
  size_t alone = 0;
  for (uint32_t cp = 0; cp < kCodePoints; ++cp) {
    if (is_surrogate(cp) || (in_part1[cp] && old_enough[cp])) continue;
    const std::string text = utf8_of({cp});
    const std::string normalized = nfc(text);
    if (normalized != text) ADD_FAILURE() << "U+" << std::hex << cp << " does not map to itself";
    ++alone;
  }
  EXPECT_GT(alone, 1000000u);
}

}  // namespace
}  // namespace llm
