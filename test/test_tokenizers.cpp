// The tokenizers: UTF-8 replacement and the split patterns of Llama 3 and
// Qwen2 against Python's (bytes.decode(errors="replace"), its outputs pasted
// here, and the `regex` package with each pattern, in test/split_cases.h
// made by tools/make_split_cases.py), the Unicode classes at the version
// tiktoken and tokenizers implement, and every kind's ids against its
// reference library on the committed fixtures (test/data/tokenizers, made
// by tools/make_tokenizer_fixtures.py), Qwen2's NFC included.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "data/tokenizers/split_pattern.h"
#include "data/tokenizers/unicode_classes.h"
#include "data/tokenizers/unicode_nfc.h"
#include "data/utf8.h"
#include "error_of.h"
#include "test/split_cases.h"
#include "base/file_io.h"
#include "test/temp_dir.h"

namespace llm {
namespace {

using test_support::error_of;
using test_support::TempDir;

TEST(Utf8, ReplacesMaximalIllFormedSubpartsAsPythonDoes) {
  // (input, Python's input.decode("utf-8", "replace").encode())
  const std::pair<std::string, std::string> cases[] = {
      {"\x6F\x6B", "\x6F\x6B"},
      {"\x80", "\xEF\xBF\xBD"},
      {"\x61\xC0\xAF\x62", "\x61\xEF\xBF\xBD\xEF\xBF\xBD\x62"},
      {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xF0\x9F\x98", "\xEF\xBF\xBD"},
      {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
      {"\xE2\x82", "\xEF\xBF\xBD"},
      {"\xE2\x82\x78", "\xEF\xBF\xBD\x78"},
      {"\xF5\x80", "\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xE0\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xC2", "\xEF\xBF\xBD"},
      {"\xFF\xFE", "\xEF\xBF\xBD\xEF\xBF\xBD"},
  };
  for (const auto& [input, expected] : cases) {
    EXPECT_EQ(replace_invalid_utf8(input), expected) << input;
    EXPECT_EQ(is_valid_utf8(input), input == expected) << input;
  }
}

TEST(SplitPattern, SplitsAsTheRegexDoes) {
  // Each alternative of each pattern, with the `regex` package's pieces.
  for (const test_support::SplitCase& c : test_support::kSplitCases) {
    std::vector<std::string> pieces;
    split_pieces(c.text, c.pattern, [&](std::string_view piece) { pieces.emplace_back(piece); });
    EXPECT_EQ(pieces, c.pieces) << split_pattern_text(c.pattern) << ": " << c.alternative << ": "
                                << c.text;
  }
}

TEST(SplitPattern, KnowsEachPatternBySpelling) {
  for (SplitPattern pattern : {SplitPattern::llama3, SplitPattern::qwen2}) {
    EXPECT_EQ(split_pattern_of(split_pattern_text(pattern)), pattern);
  }
  EXPECT_EQ(split_pattern_of(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+)"), std::nullopt);
}

// UTF-8 of U"..." text.
std::string utf8(std::u32string_view text) {
  std::string out;
  for (char32_t cp : text) append_utf8(static_cast<uint32_t>(cp), out);
  return out;
}

// The classes follow Unicode 16.0, as tiktoken and tokenizers do (docs/data.md;
// tools/check_unicode_classes.py compares every code point): letters and digits
// of 15.1 and 16.0 are letters and numbers, those of each later version are
// neither. Code points, names and versions from Unicode's DerivedAge.txt and
// UnicodeData.txt.
TEST(UnicodeClasses, FollowUnicode16AsTheReferenceLibrariesDo) {
  const struct {
    uint32_t code_point;
    const char* what;
    CharClass expected;
  } cases[] = {
      {0x2EBF0, "15.1 CJK UNIFIED IDEOGRAPH-2EBF0 (Extension I)", CharClass::letter},
      {0x1C89, "16.0 CYRILLIC CAPITAL LETTER TJE", CharClass::letter},
      {0x105C0, "16.0 TODHRI LETTER A", CharClass::letter},
      {0x10D40, "16.0 GARAY DIGIT ZERO", CharClass::number},
      {0x16130, "16.0 GURUNG KHEMA DIGIT ZERO", CharClass::number},
      {0x323B0, "17.0 CJK UNIFIED IDEOGRAPH-323B0 (Extension J)", CharClass::other},
      {0x10940, "17.0 SIDETIC LETTER N01", CharClass::other},
      {0x18D09, "17.0 TANGUT IDEOGRAPH-18D09", CharClass::other},
      {0x1E6C0, "17.0 TAI YO LETTER LOW KO", CharClass::other},
      {0x11DE0, "17.0 TOLONG SIKI DIGIT ZERO", CharClass::other},
      {0xA7DD, "18.0 LATIN CAPITAL LETTER CLOSED OMEGA", CharClass::other},
      {0x18E00, "18.0 JURCHEN CHARACTER-18E00", CharClass::other},
      {0x3D000, "18.0 SMALL SEAL CHARACTER-3D000", CharClass::other},
      {0x12550, "18.0 CUNEIFORM NUMERIC SIGN ONE N01", CharClass::other},
  };
  for (const auto& c : cases) EXPECT_EQ(char_class(c.code_point), c.expected) << c.what;
}

// Split as tokenizers 0.23.3's Split(pattern, "isolated") splits them: a 17.0
// or 18.0 character is punctuation-like ("other"), so an apostrophe after it
// joins it and "'s" is no contraction; 16.0's Garay digits are digits.
TEST(SplitPattern, SplitsNewerCharactersAsTheReferenceLibrariesDo) {
  const std::string text =
      utf8(U"\U00012550 \U00011DE0's \U00010D40's \U00010D40\U00010D41 \U00011DE0\U00011DE1");
  const std::vector<std::string> common = {
      utf8(U"\U00012550"), utf8(U" \U00011DE0'"), "s", " ", utf8(U"\U00010D40"), "'s", " "};
  std::vector<std::string> llama3 = common, qwen2 = common;
  llama3.insert(llama3.end(), {utf8(U"\U00010D40\U00010D41"), utf8(U" \U00011DE0\U00011DE1")});
  qwen2.insert(qwen2.end(),
               {utf8(U"\U00010D40"), utf8(U"\U00010D41"), utf8(U" \U00011DE0\U00011DE1")});
  for (const auto& [pattern, expected] :
       {std::pair{SplitPattern::llama3, llama3}, std::pair{SplitPattern::qwen2, qwen2}}) {
    std::vector<std::string> pieces;
    split_pieces(text, pattern, [&](std::string_view piece) { pieces.emplace_back(piece); });
    EXPECT_EQ(pieces, expected) << split_pattern_text(pattern);
  }
}

std::string base64_decode(const std::string& text) {
  std::string out;
  uint32_t bits = 0;
  int held = 0;
  for (char c : text) {
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char* at = c == '=' ? nullptr : std::strchr(alphabet, c);
    if (!at) continue;
    bits = (bits << 6) | static_cast<uint32_t>(at - alphabet);
    held += 6;
    if (held >= 8) {
      held -= 8;
      out.push_back(static_cast<char>((bits >> held) & 0xFF));
    }
  }
  return out;
}

const std::string kFixtures = "test/data/tokenizers/";

// Every fixture document through `tokenizer_file` against the reference
// library's ids in `expected_file`; decoding gives the text back, in NFC
// where the tokenizer normalizes to it.
void expect_reference_ids(const std::string& tokenizer_file, const std::string& expected_file,
                          TokenizerKind kind, bool normalizes_to_nfc = false) {
  const Tokenizer tokenizer = Tokenizer::load(kFixtures + tokenizer_file);
  EXPECT_EQ(tokenizer.kind(), kind);
  const auto cases = nlohmann::json::parse(read_file(kFixtures + "cases.json"));
  const auto expected = nlohmann::json::parse(read_file(kFixtures + expected_file));
  ASSERT_EQ(expected["tokenizer"], tokenizer_file);
  const auto& documents = cases["documents"];
  ASSERT_EQ(documents.size(), expected["ids"].size());
  ASSERT_GE(documents.size(), 50u);
  int mismatches = 0;
  for (size_t i = 0; i < documents.size(); ++i) {
    const std::string text = base64_decode(documents[i].get<std::string>());
    const std::vector<int> ids = tokenizer.encode(text);
    const auto want = expected["ids"][i].get<std::vector<int>>();
    if (ids != want && ++mismatches <= 3) {
      ADD_FAILURE() << tokenizer_file << ": document " << i << " differs from "
                    << expected["reference"] << "; text: " << text;
    }
    if (tokenizer.kind() != TokenizerKind::sentencepiece) {
      const std::string valid = replace_invalid_utf8(text);
      EXPECT_EQ(tokenizer.decode(ids), normalizes_to_nfc ? nfc(valid) : valid) << "document " << i;
    }
  }
  EXPECT_EQ(mismatches, 0) << tokenizer_file;
}

TEST(Tokenizer, TiktokenFileEncodesAsTiktoken) {
  expect_reference_ids("bpe.tiktoken", "expected_tiktoken.json", TokenizerKind::tiktoken);
}

TEST(Tokenizer, TokenizerJsonEncodesAsHuggingFaceTokenizers) {
  expect_reference_ids("tokenizer.json", "expected_tokenizer_json.json",
                       TokenizerKind::hf_tokenizer_json);
}

// Qwen2's and Qwen3's layout: NFC first (8 of the fixture documents encode
// otherwise without it), one digit a piece, merges not ignored.
TEST(Tokenizer, QwenTokenizerJsonEncodesAsHuggingFaceTokenizers) {
  expect_reference_ids("qwen2_tokenizer.json", "expected_qwen2_tokenizer_json.json",
                       TokenizerKind::hf_tokenizer_json, /*normalizes_to_nfc=*/true);
}

// A CJK Extension J ideograph (Unicode 17.0) before "'s", as in the report
// that Qwen's vocabulary gave [172, 110, 236, 108, 594] here and
// [172, 110, 236, 108, 6, 82] in tokenizers and tiktoken; and characters of
// 16.0, 17.0 and 18.0 before "'s" and as digits. The ids are tokenizers
// 0.23.3's (the two tokenizer.json fixtures) and tiktoken 0.14.0's
// (bpe.tiktoken), which agree on them.
TEST(Tokenizer, CharactersNewerThanUnicode16EncodeAsTheReferenceLibrariesDo) {
  const std::pair<std::string, std::vector<int>> cases[] = {
      {utf8(U"\U000323B0's"), {172, 110, 236, 108, 6, 82}},
      {utf8(U"\U00012550 \U00011DE0's \U00010D40's"),
       {172, 240, 243, 238, 220, 172, 239, 115, 254, 6, 82, 220, 172, 238, 113, 222, 321}},
  };
  for (const char* file : {"qwen2_tokenizer.json", "tokenizer.json", "bpe.tiktoken"}) {
    const Tokenizer tokenizer = Tokenizer::load(kFixtures + file);
    for (const auto& [text, ids] : cases)
      EXPECT_EQ(tokenizer.encode(text), ids) << file << ": " << text;
  }
}

// Qwen's documents have no BOS: each ends with <|endoftext|>, and the next
// starts after it.
TEST(Tokenizer, QwenDocumentsEndWithEndOfTextAndHaveNoBos) {
  const Tokenizer tokenizer = Tokenizer::load(kFixtures + "qwen2_tokenizer.json");
  EXPECT_EQ(tokenizer.bos_id(), -1);
  EXPECT_EQ(tokenizer.piece(tokenizer.eos_id()), "<|endoftext|>");
  std::vector<int> document;
  tokenizer.encode_document("Hello 123", document);
  std::vector<int> expected = tokenizer.encode("Hello 123");
  expected.push_back(tokenizer.eos_id());
  EXPECT_EQ(document, expected);
  const DocumentBoundary boundary = tokenizer.document_boundary();
  EXPECT_EQ(boundary.token, tokenizer.eos_id());
  EXPECT_TRUE(boundary.token_ends_document);
  const Tokenizer llama = Tokenizer::load(kFixtures + "tokenizer.json");
  EXPECT_EQ(llama.document_boundary().token, llama.bos_id());
  EXPECT_FALSE(llama.document_boundary().token_ends_document);
}

TEST(Tokenizer, SentencePieceModelEncodesAsSentencePiece) {
  expect_reference_ids("sentencepiece.model", "expected_sentencepiece.json",
                       TokenizerKind::sentencepiece);
}

TEST(Tokenizer, ByteLevelKindsHaveLlama3sDocumentTokens) {
  for (const char* file : {"bpe.tiktoken", "tokenizer.json"}) {
    const Tokenizer tokenizer = Tokenizer::load(kFixtures + file);
    EXPECT_EQ(tokenizer.piece(tokenizer.bos_id()), "<|begin_of_text|>") << file;
    EXPECT_EQ(tokenizer.piece(tokenizer.eos_id()), "<|end_of_text|>") << file;
    EXPECT_EQ(tokenizer.eos_id(), tokenizer.bos_id() + 1) << file;
    // Text that looks like a special token is ordinary text.
    const std::vector<int> ids = tokenizer.encode("<|begin_of_text|>");
    EXPECT_GT(ids.size(), 1u) << file;
    EXPECT_EQ(std::count(ids.begin(), ids.end(), tokenizer.bos_id()), 0) << file;
  }
}

// Byte-level tokens may split a UTF-8 character (generation can stop
// between them): decoding gives U+FFFD for a partial character, the
// character once both halves are there.
TEST(Tokenizer, ByteLevelDecodingOfASplitCharacter) {
  const Tokenizer tokenizer = Tokenizer::load(kFixtures + "bpe.tiktoken");
  const std::vector<int> ids = tokenizer.encode("\xE2\x82\xAC");  // the euro sign: 3 bytes
  std::vector<int> bytes;  // the same text one byte per token
  for (unsigned char byte : std::string("\xE2\x82\xAC")) {
    for (int id = 0; id < tokenizer.vocab_size(); ++id) {
      if (tokenizer.piece(id) == std::string(1, static_cast<char>(byte))) bytes.push_back(id);
    }
  }
  ASSERT_EQ(bytes.size(), 3u);
  EXPECT_EQ(tokenizer.decode(ids), "\xE2\x82\xAC");
  EXPECT_EQ(tokenizer.decode(std::vector<int>(bytes.begin(), bytes.begin() + 2)), "\xEF\xBF\xBD");
  EXPECT_EQ(tokenizer.decode(bytes), "\xE2\x82\xAC");
}

// Export writes a byte-level BPE as a tokenizer.json; read back, it encodes
// every fixture document as the original does (both kinds, both layouts).
TEST(Tokenizer, ItsTokenizerJsonFormEncodesAsItDoes) {
  TempDir dir("llm_test_tokenizers_");
  const auto cases = nlohmann::json::parse(read_file(kFixtures + "cases.json"));
  for (const char* file : {"bpe.tiktoken", "tokenizer.json", "qwen2_tokenizer.json"}) {
    const Tokenizer original = Tokenizer::load(kFixtures + file);
    write_file_atomically(dir.file("tokenizer.json"), original.hf_tokenizer_json());
    const Tokenizer copy = Tokenizer::load(dir.file("tokenizer.json"));
    EXPECT_EQ(copy.vocab_size(), original.vocab_size());
    EXPECT_EQ(copy.bos_id(), original.bos_id());
    EXPECT_EQ(copy.eos_id(), original.eos_id());
    for (const auto& document : cases["documents"]) {
      const std::string text = base64_decode(document.get<std::string>());
      EXPECT_EQ(copy.encode(text), original.encode(text)) << file << ": " << text;
    }
  }
  EXPECT_NE(error_of([] {
              Tokenizer::load(kFixtures + "sentencepiece.model").hf_tokenizer_json();
            }).find("no tokenizer.json form"),
            std::string::npos);
}

// A tokenizer.json merges only the pairs it lists, in list order: for "abc"
// with merges [b c, a b, ab c], "b c" ranks first, and (a, bc) is not listed,
// so the piece ends as [a, bc] although "abc" is a token; with ignore_merges
// the whole piece is that token. (A tiktoken file would give "abc": its
// merges are every split of every token.)
TEST(Tokenizer, TokenizerJsonMergesOnlyItsListedPairsInListOrder) {
  TempDir dir("llm_test_tokenizers_");
  nlohmann::json vocab = nlohmann::json::object();
  // GPT-2's byte-level alphabet: printable Latin-1 bytes as themselves, the
  // rest from U+0100 on, in byte order.
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const uint32_t c = printable ? static_cast<uint32_t>(b) : 256u + static_cast<uint32_t>(extra++);
    std::string spelled;
    append_utf8(c, spelled);
    vocab[spelled] = b;
  }
  vocab["bc"] = 256;
  vocab["ab"] = 257;
  vocab["abc"] = 258;
  for (bool ignore_merges : {false, true}) {
    nlohmann::json file = {
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", std::string(split_pattern_text(SplitPattern::llama3))}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
        {"model",
         {{"type", "BPE"},
          {"ignore_merges", ignore_merges},
          {"vocab", vocab},
          {"merges", {"b c", "a b", "ab c"}}}},
        {"added_tokens",
         {{{"id", 259}, {"content", "<|begin_of_text|>"}},
          {{"id", 260}, {"content", "<|end_of_text|>"}}}}};
    write_file_atomically(dir.file("tokenizer.json"), file.dump());
    const Tokenizer tokenizer = Tokenizer::load(dir.file("tokenizer.json"));
    const std::vector<int> whole = {258}, listed = {'a', 256};
    EXPECT_EQ(tokenizer.encode("abc"), ignore_merges ? whole : listed);
    EXPECT_EQ(tokenizer.encode("xab"), (std::vector<int>{'x', 257}));
    EXPECT_EQ(tokenizer.vocab_size(), 261);
    // A key holding another JSON type than it takes is refused, naming the
    // file (found by reading: nlohmann's type errors are not llm::Errors).
    for (const auto& [key, value] :
         {std::pair{"post_processor", nlohmann::json(5)},
          std::pair{"post_processor", nlohmann::json{{"type", "Sequence"}, {"processors", 5}}}}) {
      nlohmann::json odd = file;
      odd[key] = value;
      write_file_atomically(dir.file("odd.json"), odd.dump());
      EXPECT_NE(error_of([&] { Tokenizer::load(dir.file("odd.json")); }).find(dir.file("odd.json")),
                std::string::npos)
          << value;
    }
    nlohmann::json odd = file;
    odd["model"]["ignore_merges"] = "yes";
    write_file_atomically(dir.file("odd.json"), odd.dump());
    EXPECT_NE(error_of([&] { Tokenizer::load(dir.file("odd.json")); }).find(dir.file("odd.json")),
              std::string::npos);
    // Without a special token known to end documents, it is refused.
    file["added_tokens"] = {{{"id", 259}, {"content", "<|im_end|>"}}};
    write_file_atomically(dir.file("no_eos.json"), file.dump());
    EXPECT_NE(error_of([&] {
                Tokenizer::load(dir.file("no_eos.json"));
              }).find("added_tokens must hold <|end_of_text|> or <|endoftext|>"),
              std::string::npos);
  }
  // Another pre-tokenizer or normalizer is refused, naming the key.
  write_file_atomically(dir.file("other.json"),
                        R"({"normalizer": null, "pre_tokenizer": {"type": "Whitespace"}})");
  EXPECT_NE(error_of([&] { Tokenizer::load(dir.file("other.json")); }).find("pre_tokenizer.type"),
            std::string::npos);
  write_file_atomically(dir.file("nfkc.json"), R"({"normalizer": {"type": "NFKC"}})");
  EXPECT_NE(error_of([&] { Tokenizer::load(dir.file("nfkc.json")); }).find("normalizer"),
            std::string::npos);
}

}  // namespace
}  // namespace llm
