// Reading tokenizer.json: the byte-level alphabet (GPT-2's bytes_to_unicode:
// printable Latin-1 bytes stand for themselves, the other 68 are mapped to
// U+0100 upward in byte order), then vocab, merges (as "a b" strings or as
// [a, b] pairs), added tokens, and the structure checks. Writing one lays it
// out as the file it came from would be: Llama 3's (no normalizer, a BOS
// template) or Qwen2's (NFC, no BOS).
#include "data/tokenizers/hf_tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <unordered_map>

#include "data/tokenizers/split_pattern.h"
#include "data/utf8.h"
#include "base/error.h"
#include "base/file_io.h"

namespace llm {
namespace {

using nlohmann::json;

// Code point -> byte of the byte-level alphabet (-1: not in it).
std::unordered_map<uint32_t, int> byte_of_char() {
  std::unordered_map<uint32_t, int> map;
  uint32_t extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    map.emplace(printable ? static_cast<uint32_t>(b) : 256 + extra++, b);
  }
  return map;
}

class TokenizerJson {
 public:
  explicit TokenizerJson(const std::string& path) : path_(path) {
    const std::string text = read_file(path);
    try {
      root_ = json::parse(text);
    } catch (const json::exception& e) {
      LLM_FAIL("{}: not valid JSON: {}", path, e.what());
    }
    LLM_CHECK(root_.is_object(), "{}: not a JSON object", path);
  }

  const json& at(const json& object, const char* key, const char* where) const {
    LLM_CHECK(object.is_object() && object.contains(key), "{}: {} has no key '{}'", path_, where,
              key);
    return object.at(key);
  }
  void require(bool condition, const std::string& what) const {
    if (!condition) fail(what);
  }
  [[noreturn]] void fail(const std::string& what) const {
    LLM_FAIL("{}: {} (only the byte-level BPE of Llama 3 and Qwen2/Qwen3 is supported)", path_,
             what);
  }
  const json& root() const { return root_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  json root_;
};

// The special tokens that end a document, by family: the first the file has.
// (tokenizer.json does not say; Llama 3's pretraining ends documents with
// <|end_of_text|>, Qwen's with <|endoftext|>.)
constexpr const char* kDocumentEnds[] = {"<|end_of_text|>", "<|endoftext|>"};

// Llama 3's layout: Sequence[Split(pattern, Isolated), ByteLevel(use_regex
// false)], the pattern Llama 3's or Qwen2's.
SplitPattern read_pre_tokenizer(const TokenizerJson& file) {
  const json& pre = file.at(file.root(), "pre_tokenizer", "the file");
  file.require(pre.is_object() && pre.value("type", "") == "Sequence",
               "pre_tokenizer.type must be Sequence");
  const json& steps = file.at(pre, "pretokenizers", "pre_tokenizer");
  file.require(steps.is_array() && steps.size() == 2,
               "pre_tokenizer.pretokenizers must be [Split, ByteLevel]");
  const json& split = steps[0];
  file.require(split.value("type", "") == "Split" && split.value("behavior", "") == "Isolated" &&
                   !split.value("invert", true),
               "pre_tokenizer.pretokenizers[0] must be a Split, behavior Isolated, not inverted");
  const json& pattern = file.at(split, "pattern", "pre_tokenizer.pretokenizers[0]");
  const std::optional<SplitPattern> known =
      pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()
          ? split_pattern_of(pattern["Regex"].get<std::string>())
          : std::nullopt;
  file.require(known.has_value(),
               "pre_tokenizer.pretokenizers[0].pattern must be the Regex of Llama 3 or Qwen2");
  const json& level = steps[1];
  file.require(level.value("type", "") == "ByteLevel" && !level.value("use_regex", true) &&
                   !level.value("add_prefix_space", true),
               "pre_tokenizer.pretokenizers[1] must be ByteLevel with use_regex and "
               "add_prefix_space false");
  return *known;
}

// None, or NFC (Qwen's).
bool read_normalizer(const TokenizerJson& file) {
  const json& root = file.root();
  if (!root.contains("normalizer") || root["normalizer"].is_null()) return false;
  file.require(root["normalizer"].is_object() && root["normalizer"].value("type", "") == "NFC",
               "normalizer must be null or NFC");
  return true;
}

// The special token the post-processor puts before a text: its
// TemplateProcessing's (alone or in a Sequence) leading SpecialToken, or
// none (Qwen's ByteLevel post-processor adds nothing).
std::string read_bos(const TokenizerJson& file) {
  const json& root = file.root();
  if (!root.contains("post_processor") || root["post_processor"].is_null()) return "";
  const json& post = root["post_processor"];
  std::vector<const json*> steps = {&post};
  if (post.value("type", "") == "Sequence") {
    steps.clear();
    for (const json& step : file.at(post, "processors", "post_processor")) steps.push_back(&step);
  }
  for (const json* step : steps) {
    if (step->value("type", "") != "TemplateProcessing") continue;
    const json& single = file.at(*step, "single", "post_processor's TemplateProcessing");
    file.require(single.is_array() && !single.empty(),
                 "post_processor's TemplateProcessing.single must be a non-empty array");
    const json& first = single[0];
    if (!first.contains("SpecialToken")) return "";
    return file.at(first["SpecialToken"], "id", "post_processor's TemplateProcessing.single[0]")
        .get<std::string>();
  }
  return "";
}

// The byte-level spelling of `bytes` (UTF-8 of the alphabet's characters).
std::string spelled(std::string_view bytes) {
  static const std::array<uint32_t, 256> char_of = [] {
    std::array<uint32_t, 256> table{};
    for (const auto& [c, b] : byte_of_char()) table[static_cast<size_t>(b)] = c;
    return table;
  }();
  std::string out;
  for (char byte : bytes) append_utf8(char_of[static_cast<uint8_t>(byte)], out);
  return out;
}

ByteBpeVocab read_vocab(const TokenizerJson& file) {
  const json& root = file.root();
  ByteBpeVocab vocab;
  vocab.nfc = read_normalizer(file);
  vocab.split = read_pre_tokenizer(file);
  const json& model = file.at(root, "model", "the file");
  file.require(model.value("type", "") == "BPE", "model.type must be BPE");
  file.require(!model.contains("dropout") || model["dropout"].is_null(),
               "model.dropout must be null");
  file.require(!model.value("byte_fallback", false), "model.byte_fallback must be false");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    file.require(!model.contains(key) || model[key].is_null() || model[key] == "",
                 fmt::format("model.{} must be empty", key));
  }

  const std::unordered_map<uint32_t, int> byte_of = byte_of_char();
  auto bytes_of = [&](const std::string& spelled) {
    file.require(is_valid_utf8(spelled), fmt::format("vocabulary entry is not UTF-8"));
    std::string bytes;
    for (size_t at = 0; at < spelled.size();) {
      const CodePoint c = next_code_point(spelled, at);
      const auto found = byte_of.find(c.value);
      file.require(found != byte_of.end(),
                   fmt::format("vocabulary entry '{}' is not in the byte-level alphabet", spelled));
      bytes.push_back(static_cast<char>(found->second));
      at += static_cast<size_t>(c.length);
    }
    return bytes;
  };

  const json& entries = file.at(model, "vocab", "model");
  file.require(entries.is_object(), "model.vocab must be an object");
  std::unordered_map<std::string, int> id_of;  // spelled -> id
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    file.require(it.value().is_number_integer(),
                 fmt::format("model.vocab['{}'] must be an integer", it.key()));
    const int id = it.value().get<int>();
    file.require(id >= 0 && static_cast<size_t>(id) < entries.size(),
                 fmt::format("model.vocab ids must be 0 .. {}; '{}' has {}", entries.size() - 1,
                             it.key(), id));
    id_of.emplace(it.key(), id);
  }
  vocab.tokens.resize(entries.size());
  std::vector<bool> seen(entries.size(), false);
  for (const auto& [spelled, id] : id_of) {
    file.require(!seen[static_cast<size_t>(id)],
                 fmt::format("model.vocab id {} appears twice", id));
    seen[static_cast<size_t>(id)] = true;
    vocab.tokens[static_cast<size_t>(id)] = bytes_of(spelled);
  }

  const json& merges = file.at(model, "merges", "model");
  file.require(merges.is_array(), "model.merges must be an array");
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& merge = merges[rank];
    std::string left, right;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      file.require(space != std::string::npos && text.find(' ', space + 1) == std::string::npos,
                   fmt::format("model.merges[{}] must be two tokens split by one space", rank));
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else {
      file.require(
          merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(),
          fmt::format("model.merges[{}] must be \"a b\" or [a, b]", rank));
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    }
    const auto l = id_of.find(left), r = id_of.find(right), m = id_of.find(left + right);
    file.require(l != id_of.end() && r != id_of.end() && m != id_of.end(),
                 fmt::format("model.merges[{}] ('{} {}') names a token not in model.vocab", rank,
                             left, right));
    vocab.merges.push_back({l->second, r->second, m->second, static_cast<int>(rank)});
  }
  vocab.whole_piece_lookup = model.value("ignore_merges", false);

  if (root.contains("added_tokens")) {
    for (const json& added : root["added_tokens"]) {
      const int id = file.at(added, "id", "added_tokens[]").get<int>();
      const std::string content = file.at(added, "content", "added_tokens[]").get<std::string>();
      if (static_cast<size_t>(id) < vocab.tokens.size()) continue;  // already in model.vocab
      vocab.specials.push_back({content, id});
    }
  }
  vocab.bos = read_bos(file);
  for (const char* end : kDocumentEnds) {
    const bool present = std::any_of(vocab.specials.begin(), vocab.specials.end(),
                                     [&](const ByteBpeVocab::Special& s) { return s.text == end; });
    if (present && vocab.eos.empty()) vocab.eos = end;
  }
  file.require(!vocab.eos.empty(), fmt::format("added_tokens must hold {} or {} to end documents",
                                               kDocumentEnds[0], kDocumentEnds[1]));
  return vocab;
}

}  // namespace

ByteBpeVocab read_hf_tokenizer_json(const std::string& path) {
  const TokenizerJson file(path);
  try {
    return read_vocab(file);
  } catch (const json::exception& e) {  // a value of another JSON type than the key takes
    file.fail(e.what());
  }
}

}  // namespace llm

namespace llm {

std::string hf_tokenizer_json_text(const ByteBpeVocab& vocab) {
  using ordered = nlohmann::ordered_json;
  ordered tokens = ordered::object();
  for (size_t id = 0; id < vocab.tokens.size(); ++id) tokens[spelled(vocab.tokens[id])] = id;
  ordered merges = ordered::array();
  std::vector<const ByteBpeVocab::Merge*> by_rank;
  for (const ByteBpeVocab::Merge& m : vocab.merges) by_rank.push_back(&m);
  std::stable_sort(by_rank.begin(), by_rank.end(),
                   [](const auto* a, const auto* b) { return a->rank < b->rank; });
  for (const ByteBpeVocab::Merge* m : by_rank) {
    merges.push_back(spelled(vocab.tokens[static_cast<size_t>(m->left)]) + " " +
                     spelled(vocab.tokens[static_cast<size_t>(m->right)]));
  }
  ordered added = ordered::array();
  int bos_id = -1;
  for (const ByteBpeVocab::Special& special : vocab.specials) {
    added.push_back({{"id", special.id},
                     {"content", special.text},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
    if (special.text == vocab.bos) bos_id = special.id;
  }
  const ordered byte_level = {{"type", "ByteLevel"},
                              {"add_prefix_space", false},
                              {"trim_offsets", false},
                              {"use_regex", false}};
  ordered post_processor = byte_level;  // Qwen's: nothing added around a text
  if (!vocab.bos.empty()) {             // Llama 3's: BOS before each text
    const ordered bos_token = {{"SpecialToken", {{"id", vocab.bos}, {"type_id", 0}}}};
    post_processor = {
        {"type", "TemplateProcessing"},
        {"single", {bos_token, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {bos_token,
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", vocab.bos}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens",
         {{vocab.bos, {{"id", vocab.bos}, {"ids", {bos_id}}, {"tokens", {vocab.bos}}}}}}};
  }
  const ordered file = {{"version", "1.0"},
                        {"truncation", nullptr},
                        {"padding", nullptr},
                        {"added_tokens", added},
                        {"normalizer", vocab.nfc ? ordered{{"type", "NFC"}} : ordered(nullptr)},
                        {"pre_tokenizer",
                         {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"},
                             {"pattern", {{"Regex", std::string(split_pattern_text(vocab.split))}}},
                             {"behavior", "Isolated"},
                             {"invert", false}},
                            byte_level}}}},
                        {"post_processor", post_processor},
                        {"decoder",
                         {{"type", "ByteLevel"},
                          {"add_prefix_space", true},
                          {"trim_offsets", true},
                          {"use_regex", true}}},
                        {"model",
                         {{"type", "BPE"},
                          {"dropout", nullptr},
                          {"unk_token", nullptr},
                          {"continuing_subword_prefix", nullptr},
                          {"end_of_word_suffix", nullptr},
                          {"fuse_unk", false},
                          {"byte_fallback", false},
                          {"ignore_merges", vocab.whole_piece_lookup},
                          {"vocab", tokens},
                          {"merges", merges}}}};
  return file.dump() + "\n";
}

}  // namespace llm
