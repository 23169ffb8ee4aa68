// Reading a tiktoken file: base64 per RFC 4648 (with padding), then the pairs
// that merge: tiktoken merges two adjacent tokens whenever their concatenation
// is a token, at that token's rank, so every split of a token into two tokens
// is a merge of its rank.
#include "data/tokenizers/tiktoken_file.h"

#include <charconv>
#include <unordered_map>

#include "base/error.h"
#include "base/file_io.h"

namespace llm {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// The bytes of padded base64 `text`, or false when it is not base64.
bool base64_decode(std::string_view text, std::string& out) {
  out.clear();
  if (text.empty() || text.size() % 4 != 0) return false;
  size_t padding = 0;
  while (padding < 2 && text[text.size() - 1 - padding] == '=') ++padding;
  uint32_t bits = 0;
  int held = 0;
  for (size_t i = 0; i < text.size() - padding; ++i) {
    const int value = base64_value(text[i]);
    if (value < 0) return false;
    bits = (bits << 6) | static_cast<uint32_t>(value);
    held += 6;
    if (held >= 8) {
      held -= 8;
      out.push_back(static_cast<char>((bits >> held) & 0xFF));
    }
  }
  return true;
}

// Llama 3's special tokens in id order after the ranks (llama_models'
// llama3 tokenizer): 12 named, then reserved ones up to 256 in all.
std::vector<std::string> llama3_special_texts() {
  std::vector<std::string> texts = {"<|begin_of_text|>",
                                    "<|end_of_text|>",
                                    "<|reserved_special_token_0|>",
                                    "<|reserved_special_token_1|>",
                                    "<|finetune_right_pad_id|>",
                                    "<|step_id|>",
                                    "<|start_header_id|>",
                                    "<|end_header_id|>",
                                    "<|eom_id|>",
                                    "<|eot_id|>",
                                    "<|python_tag|>",
                                    "<|image|>"};
  for (int i = 2; texts.size() < 256; ++i) {
    texts.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  }
  return texts;
}

}  // namespace

bool looks_like_tiktoken_file(std::string_view head) {
  const size_t end = head.find('\n');
  const std::string_view line = head.substr(0, end);
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space + 1 >= line.size()) return false;
  std::string bytes;
  if (!base64_decode(line.substr(0, space), bytes)) return false;
  for (char c : line.substr(space + 1)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

ByteBpeVocab read_tiktoken_file(const std::string& path) {
  const std::string text = read_file(path);
  ByteBpeVocab vocab;
  std::vector<bool> seen;
  size_t line_start = 0;
  int line_number = 0;
  std::string bytes;
  std::vector<std::pair<int, std::string>> ranked;
  while (line_start < text.size()) {
    size_t line_end = text.find('\n', line_start);
    if (line_end == std::string::npos) line_end = text.size();
    const std::string_view line(text.data() + line_start, line_end - line_start);
    line_start = line_end + 1;
    ++line_number;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    LLM_CHECK(space != std::string_view::npos && base64_decode(line.substr(0, space), bytes),
              "{}:{}: expected a base64 token, a space and its rank", path, line_number);
    int rank = -1;
    const std::string_view number = line.substr(space + 1);
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), rank);
    LLM_CHECK(error == std::errc() && end == number.data() + number.size() && rank >= 0,
              "{}:{}: rank '{}' is not a non-negative integer", path, line_number, number);
    ranked.emplace_back(rank, bytes);
  }
  LLM_CHECK(!ranked.empty(), "{}: no tokens", path);
  vocab.tokens.resize(ranked.size());
  seen.assign(ranked.size(), false);
  for (auto& [rank, token] : ranked) {
    LLM_CHECK(static_cast<size_t>(rank) < ranked.size() && !seen[static_cast<size_t>(rank)],
              "{}: ranks must be 0 .. {} each once; rank {} is out of range or repeated", path,
              ranked.size() - 1, rank);
    seen[static_cast<size_t>(rank)] = true;
    vocab.tokens[static_cast<size_t>(rank)] = std::move(token);
  }
  std::unordered_map<std::string_view, int> id_of;
  for (size_t id = 0; id < vocab.tokens.size(); ++id)
    id_of.emplace(vocab.tokens[id], static_cast<int>(id));
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    const std::string_view token = vocab.tokens[id];
    for (size_t split = 1; split < token.size(); ++split) {
      const auto left = id_of.find(token.substr(0, split));
      const auto right = id_of.find(token.substr(split));
      if (left != id_of.end() && right != id_of.end()) {
        vocab.merges.push_back(
            {left->second, right->second, static_cast<int>(id), static_cast<int>(id)});
      }
    }
  }
  const int base = static_cast<int>(vocab.tokens.size());
  const std::vector<std::string> specials = llama3_special_texts();
  for (size_t i = 0; i < specials.size(); ++i) {
    vocab.specials.push_back({specials[i], base + static_cast<int>(i)});
  }
  vocab.bos = "<|begin_of_text|>";
  vocab.eos = "<|end_of_text|>";
  vocab.whole_piece_lookup = true;
  return vocab;
}

}  // namespace llm
