// A conversation of a chat data set: the `messages` list of a JSON record,
// each message an object with a string `role` (system, user or assistant)
// and a string `content` (other keys are ignored), as OpenAI's and Hugging
// Face's chat data sets write them. Invariant: a parsed conversation has at
// least one message and at least one assistant message (the only targets).
// docs/data.md#conversations.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace llm {

enum class ChatRole { system, user, assistant };
const char* to_string(ChatRole role);

struct ChatMessage {
  ChatRole role;
  std::string content;
};

// The messages of `messages_json` (the JSON text of a record's messages list);
// a malformed one throws one line naming `origin` (e.g. "chats.jsonl:12") and
// the field (e.g. "messages[2].role").
std::vector<ChatMessage> conversation_parse(std::string_view messages_json,
                                            const std::string& origin);

}  // namespace llm
