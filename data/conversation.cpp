// conversation_parse: every check names the record and the field it failed
// on, so a bad line in a large data set is found without a JSON tool.
#include "data/conversation.h"

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace llm {
namespace {

ChatRole role_of(const nlohmann::json& message, const std::string& where) {
  const auto role = message.find("role");
  LLM_CHECK(role != message.end() && role->is_string(), "{}.role: missing or not a string", where);
  for (ChatRole known : {ChatRole::system, ChatRole::user, ChatRole::assistant}) {
    if (*role == to_string(known)) return known;
  }
  LLM_FAIL("{}.role: '{}' is not system, user or assistant", where, role->get<std::string>());
}

}  // namespace

const char* to_string(ChatRole role) {
  switch (role) {
    case ChatRole::system:
      return "system";
    case ChatRole::user:
      return "user";
    case ChatRole::assistant:
      return "assistant";
  }
  return "?";
}

std::vector<ChatMessage> conversation_parse(std::string_view messages_json,
                                            const std::string& origin) {
  nlohmann::json messages;
  try {
    messages = nlohmann::json::parse(messages_json);
  } catch (const nlohmann::json::exception& e) {
    LLM_FAIL("prepare: {}: messages: not valid JSON: {}", origin, e.what());
  }
  LLM_CHECK(messages.is_array() && !messages.empty(),
            "prepare: {}: messages: expected a non-empty list of messages", origin);
  std::vector<ChatMessage> conversation;
  bool has_assistant = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = fmt::format("prepare: {}: messages[{}]", origin, i);
    const nlohmann::json& message = messages[i];
    LLM_CHECK(message.is_object(), "{}: expected an object with role and content", where);
    const ChatRole role = role_of(message, where);
    const auto content = message.find("content");
    LLM_CHECK(content != message.end() && content->is_string(),
              "{}.content: missing or not a string", where);
    conversation.push_back({role, content->get<std::string>()});
    has_assistant |= role == ChatRole::assistant;
  }
  LLM_CHECK(has_assistant, "prepare: {}: messages: no assistant message, so nothing to train on",
            origin);
  return conversation;
}

}  // namespace llm
