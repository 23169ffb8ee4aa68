// The scanner of split_pattern.h. Each numbered block is one alternative of
// the pattern, tried in the pattern's order; the first that matches at `at`
// gives the piece. Backtracking is resolved by hand where it matters (the
// optional leading character of 2 and 4, the greedy runs of 5 and 6).
#include "data/tokenizers/split_pattern.h"

#include "data/tokenizers/unicode_classes.h"
#include "data/utf8.h"

namespace llm {

namespace {

constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool is_newline(uint32_t c) { return c == '\r' || c == '\n'; }

// (?i) folds case by Unicode's simple case folding: 's' also matches U+017F
// (LATIN SMALL LETTER LONG S); the pattern's other letters have no such twin.
uint32_t folded(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + ('a' - 'A');
  if (c == 0x17F) return 's';
  return c;
}

class Cursor {
 public:
  explicit Cursor(std::string_view text) : text_(text) {}
  bool done(size_t at) const { return at >= text_.size(); }
  CodePoint at(size_t i) const { return next_code_point(text_, i); }
  CharClass class_at(size_t i) const { return char_class(at(i).value); }
  // The end of the run of code points from i whose class is `c`.
  size_t run_end(size_t i, CharClass c) const {
    while (!done(i) && class_at(i) == c) i += static_cast<size_t>(at(i).length);
    return i;
  }
  size_t size() const { return text_.size(); }

 private:
  std::string_view text_;
};

}  // namespace

std::string_view split_pattern_text(SplitPattern pattern) {
  return pattern == SplitPattern::llama3 ? kLlama3Pattern : kQwen2Pattern;
}

std::optional<SplitPattern> split_pattern_of(std::string_view text) {
  for (SplitPattern pattern : {SplitPattern::llama3, SplitPattern::qwen2}) {
    if (text == split_pattern_text(pattern)) return pattern;
  }
  return std::nullopt;
}

size_t split_piece_length(std::string_view text, size_t start, SplitPattern pattern) {
  const Cursor s(text);
  const CodePoint first = s.at(start);
  const CharClass first_class = char_class(first.value);
  const size_t second = start + static_cast<size_t>(first.length);

  // 1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (first.value == '\'' && !s.done(second)) {
    const CodePoint c1 = s.at(second);
    const uint32_t f1 = folded(c1.value);
    const size_t third = second + static_cast<size_t>(c1.length);
    if (f1 == 's' || f1 == 't' || f1 == 'm' || f1 == 'd') return third - start;
    if (!s.done(third)) {
      const CodePoint c2 = s.at(third);
      const uint32_t f2 = folded(c2.value);
      if ((f1 == 'r' && f2 == 'e') || (f1 == 'v' && f2 == 'e') || (f1 == 'l' && f2 == 'l')) {
        return third + static_cast<size_t>(c2.length) - start;
      }
    }
  }
  // 2. [^\r\n\p{L}\p{N}]?\p{L}+
  if (first_class == CharClass::letter) return s.run_end(start, CharClass::letter) - start;
  if (first_class != CharClass::number && !is_newline(first.value) && !s.done(second) &&
      s.class_at(second) == CharClass::letter) {
    return s.run_end(second, CharClass::letter) - start;
  }
  // 3. \p{N}{1,3} (Qwen2: \p{N})
  if (first_class == CharClass::number) {
    const int digits = pattern == SplitPattern::llama3 ? 3 : 1;
    size_t end = start;
    for (int n = 0; n < digits && !s.done(end) && s.class_at(end) == CharClass::number; ++n) {
      end += static_cast<size_t>(s.at(end).length);
    }
    return end - start;
  }
  // 4. ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t symbols = std::string_view::npos;
  if (first_class == CharClass::other) {
    symbols = start;
  } else if (first.value == ' ' && !s.done(second) && s.class_at(second) == CharClass::other) {
    symbols = second;
  }
  if (symbols != std::string_view::npos) {
    size_t end = s.run_end(symbols, CharClass::other);
    while (!s.done(end) && is_newline(static_cast<uint8_t>(text[end]))) ++end;
    return end - start;
  }
  // first is white space from here on.
  const size_t run_end = s.run_end(start, CharClass::space);
  // 5. \s*[\r\n]+ : up to the run's last newline, if it has one.
  size_t last_newline_end = 0;
  for (size_t i = start; i < run_end; i += static_cast<size_t>(s.at(i).length)) {
    if (is_newline(static_cast<uint8_t>(text[i]))) last_newline_end = i + 1;
  }
  if (last_newline_end != 0) return last_newline_end - start;
  // 6. \s+(?!\S) : the whole run at the end of the text, else all but its
  // last code point, which then leads the next piece.
  if (s.done(run_end)) return run_end - start;
  size_t last = start;
  for (size_t i = start; i < run_end; i += static_cast<size_t>(s.at(i).length)) last = i;
  if (last > start) return last - start;
  // 7. \s+ : a single white-space code point before non-space.
  return run_end - start;
}

}  // namespace llm
