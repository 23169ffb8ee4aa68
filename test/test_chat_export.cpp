// The chat template export writes (ChatTemplate::hf_chat_template) renders a
// conversation to text; transformers' apply_chat_template then encodes that
// text whole, cutting it only at special tokens. These tests check, on both
// fixture formats and a varied set of conversations (system turns, several
// turns, white space at the edges, Unicode, digits, quotes and braces), that
// encoding the text of render's ids that way gives render's ids, so the
// template's text (chat_export_test.sh checks it with Jinja itself) gives
// prepare --chat's ids.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/conversation.h"
#include "data/tokenizer.h"
#include "base/file_io.h"

namespace llm {
namespace {

constexpr char kConversations[] = "test/data/chat/varied_conversations.jsonl";

struct Special {
  std::string text;
  int id;
};

std::vector<Special> specials_of(const Tokenizer& tokenizer) {
  std::vector<Special> specials;
  for (int id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::string piece = tokenizer.piece(id);
    if (tokenizer.special_id(piece) == id) specials.push_back({piece, id});
  }
  return specials;
}

// `text` as transformers encodes it without adding special tokens: each
// special token's text is that token, the text between encoded whole.
std::vector<int> encode_as_hf(const Tokenizer& tokenizer, std::string_view text) {
  const std::vector<Special> specials = specials_of(tokenizer);
  std::vector<int> ids;
  while (!text.empty()) {
    size_t at = std::string_view::npos;
    const Special* found = nullptr;
    for (const Special& special : specials) {
      const size_t where = text.find(special.text);
      if (where == std::string_view::npos) continue;
      if (where < at || (where == at && special.text.size() > found->text.size())) {
        at = where;
        found = &special;
      }
    }
    const std::vector<int> before = tokenizer.encode(text.substr(0, at));
    ids.insert(ids.end(), before.begin(), before.end());
    if (!found) break;
    ids.push_back(found->id);
    text.remove_prefix(at + found->text.size());
  }
  return ids;
}

std::vector<std::vector<ChatMessage>> varied_conversations() {
  std::vector<std::vector<ChatMessage>> conversations;
  std::istringstream lines(read_file(kConversations));
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string messages = nlohmann::json::parse(line)["messages"].dump();
    conversations.push_back(
        conversation_parse(messages, std::string(kConversations) + ":" + std::to_string(number)));
  }
  return conversations;
}

// Whether a message spells a special token: transformers makes that text the
// token, prepare --chat keeps it text (the one known difference in ids).
bool spells_a_special(const std::vector<ChatMessage>& conversation, const Tokenizer& tokenizer) {
  for (const ChatMessage& message : conversation) {
    for (const Special& special : specials_of(tokenizer)) {
      if (message.content.find(special.text) != std::string::npos) return true;
    }
  }
  return false;
}

void expect_text_encodes_to_render_ids(const std::string& tokenizer_file) {
  const Tokenizer tokenizer = Tokenizer::load(tokenizer_file);
  const ChatTemplate chat = ChatTemplate::for_tokenizer(tokenizer, "");
  int checked = 0;
  for (const auto& conversation : varied_conversations()) {
    MaskedTokens rendered;
    chat.render(conversation, rendered);
    if (spells_a_special(conversation, tokenizer)) continue;
    EXPECT_EQ(encode_as_hf(tokenizer, tokenizer.decode(rendered.ids)), rendered.ids)
        << tokenizer_file << ": " << tokenizer.decode(rendered.ids);
    ++checked;
  }
  EXPECT_GE(checked, 8);
  const std::vector<int> prompt = chat.render_prompt("Caf\u00e9 \U000323B0's 12345?");
  EXPECT_EQ(encode_as_hf(tokenizer, tokenizer.decode(prompt)), prompt);
}

TEST(ChatExport, Llama3TextEncodedWholeGivesRendersIds) {
  expect_text_encodes_to_render_ids("test/data/tokenizers/bpe.tiktoken");
}

TEST(ChatExport, ChatmlTextEncodedWholeGivesRendersIds) {
  expect_text_encodes_to_render_ids("test/data/tokenizers/qwen2_tokenizer.json");
}

}  // namespace
}  // namespace llm
