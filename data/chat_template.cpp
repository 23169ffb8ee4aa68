// ChatTemplate: the special tokens are looked up once by their text; the
// format is chosen from them unless named. Its Jinja form writes the same
// parts in the same order as render, the special tokens as their text.
#include "data/chat_template.h"

#include <fmt/format.h>

#include "data/tokenizer.h"
#include "base/error.h"

namespace llm {
namespace {

constexpr const char* kLlama3Tokens[] = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
constexpr const char* kChatmlTokens[] = {"<|im_start|>", "<|im_end|>"};
// What Llama 3's format strips from each message's content.
constexpr const char* kAsciiSpace = " \t\n\r\v\f";
// The text after Llama 3's <|end_header_id|>, after ChatML's role, and
// after ChatML's <|im_end|>.
constexpr const char* kLlama3AfterHeader = "\n\n";
constexpr const char* kChatmlAfterRole = "\n";
constexpr const char* kChatmlAfterTurn = "\n";

template <size_t N>
bool has_all(const Tokenizer& tokenizer, const char* const (&texts)[N]) {
  for (const char* text : texts) {
    if (tokenizer.special_id(text) < 0) return false;
  }
  return true;
}

template <size_t N>
std::string join(const char* const (&texts)[N]) {
  std::string list;
  for (const char* text : texts) list += (list.empty() ? "" : ", ") + std::string(text);
  return list;
}

std::string_view strip_ascii_space(std::string_view text) {
  const size_t first = text.find_first_not_of(kAsciiSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kAsciiSpace) - first + 1);
}

// `text` as a Jinja string literal (Python's escapes).
std::string jinja_literal(std::string_view text) {
  std::string literal = "'";
  for (const char c : text) {
    if (c == '\\' || c == '\'') {
      literal += '\\';
      literal += c;
    } else if (c == '\n') {
      literal += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      literal += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      literal += c;
    }
  }
  return literal + "'";
}

void append(const std::vector<int>& ids, bool kept, MaskedTokens& out) {
  out.ids.insert(out.ids.end(), ids.begin(), ids.end());
  out.kept.insert(out.kept.end(), ids.size(), kept ? 1 : 0);
}

}  // namespace

ChatTemplate ChatTemplate::for_tokenizer(const Tokenizer& tokenizer, const std::string& name) {
  LLM_CHECK(name.empty() || name == "llama3" || name == "chatml",
            "chat format '{}': expected llama3 or chatml", name);
  const bool llama3 = has_all(tokenizer, kLlama3Tokens);
  const bool chatml = has_all(tokenizer, kChatmlTokens);
  if (name == "llama3" || (name.empty() && llama3)) {
    LLM_CHECK(llama3, "tokenizer {}: no Llama 3 chat format: it lacks one of {}", tokenizer.path(),
              join(kLlama3Tokens));
    return ChatTemplate(tokenizer, ChatFormat::llama3);
  }
  LLM_CHECK(chatml,
            "tokenizer {}: no chat format: it has neither Llama 3's special tokens ({}) nor "
            "ChatML's ({})",
            tokenizer.path(), join(kLlama3Tokens), join(kChatmlTokens));
  return ChatTemplate(tokenizer, ChatFormat::chatml);
}

bool ChatTemplate::has_format(const Tokenizer& tokenizer) {
  return has_all(tokenizer, kLlama3Tokens) || has_all(tokenizer, kChatmlTokens);
}

ChatTemplate::ChatTemplate(const Tokenizer& tokenizer, ChatFormat format)
    : tokenizer_(&tokenizer), format_(format) {
  if (format == ChatFormat::llama3) {
    start_of_header_ = tokenizer.special_id("<|start_header_id|>");
    end_of_header_ = tokenizer.special_id("<|end_header_id|>");
    end_of_turn_ = tokenizer.special_id("<|eot_id|>");
  } else {
    start_of_header_ = tokenizer.special_id("<|im_start|>");
    end_of_turn_ = tokenizer.special_id("<|im_end|>");
  }
}

const char* ChatTemplate::name() const {
  return format_ == ChatFormat::llama3 ? "Llama 3's chat format" : "ChatML";
}

void ChatTemplate::append_header(ChatRole role, MaskedTokens& out) const {
  const std::string role_text = to_string(role);
  if (format_ == ChatFormat::llama3) {
    append({start_of_header_}, false, out);
    append(tokenizer_->encode(role_text), false, out);
    append({end_of_header_}, false, out);
    append(tokenizer_->encode(kLlama3AfterHeader), false, out);
  } else {
    append({start_of_header_}, false, out);
    append(tokenizer_->encode(role_text + kChatmlAfterRole), false, out);
  }
}

void ChatTemplate::append_turn(const ChatMessage& message, MaskedTokens& out) const {
  const bool kept = message.role == ChatRole::assistant;
  append_header(message.role, out);
  const std::string_view content =
      format_ == ChatFormat::llama3 ? strip_ascii_space(message.content) : message.content;
  append(tokenizer_->encode(content), kept, out);
  append({end_of_turn_}, kept, out);
  if (format_ == ChatFormat::chatml) append(tokenizer_->encode(kChatmlAfterTurn), false, out);
}

void ChatTemplate::render(const std::vector<ChatMessage>& conversation, MaskedTokens& out) const {
  out.ids.clear();
  out.kept.clear();
  const int bos = tokenizer_->bos_id();
  if (bos >= 0) append({bos}, false, out);
  for (const ChatMessage& message : conversation) append_turn(message, out);
  if (bos < 0) append({tokenizer_->eos_id()}, false, out);
}

std::vector<int> ChatTemplate::render_prompt(std::string_view prompt) const {
  MaskedTokens out;
  if (tokenizer_->bos_id() >= 0) append({tokenizer_->bos_id()}, false, out);
  append_turn({ChatRole::user, std::string(prompt)}, out);
  append_header(ChatRole::assistant, out);
  return out.ids;
}

std::string ChatTemplate::hf_chat_template() const {
  const auto special = [&](int id) { return jinja_literal(tokenizer_->piece(id)); };
  // The header of `role` (a Jinja expression), as append_header writes it.
  const auto header = [&](const std::string& role) {
    return format_ == ChatFormat::llama3
               ? special(start_of_header_) + " + " + role + " + " + special(end_of_header_) +
                     " + " + jinja_literal(kLlama3AfterHeader)
               : special(start_of_header_) + " + " + role + " + " + jinja_literal(kChatmlAfterRole);
  };
  const std::string content =
      format_ == ChatFormat::llama3
          ? fmt::format("(message['content'] | trim({}))", jinja_literal(kAsciiSpace))
          : "message['content']";
  const int bos = tokenizer_->bos_id();
  std::string jinja = bos >= 0 ? "{{- " + special(bos) + " }}" : "";
  jinja += "{%- for message in messages %}{{- " + header("message['role']") + " + " + content +
           " + " + special(end_of_turn_) +
           (format_ == ChatFormat::chatml ? " + " + jinja_literal(kChatmlAfterTurn) : "") +
           " }}{%- endfor %}";
  jinja += "{%- if add_generation_prompt %}{{- " +
           header(jinja_literal(to_string(ChatRole::assistant))) + " }}";
  if (bos < 0) jinja += "{%- else %}{{- " + special(tokenizer_->eos_id()) + " }}";
  return jinja + "{%- endif %}";
}

}  // namespace llm
