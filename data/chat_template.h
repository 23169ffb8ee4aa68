// A model's chat format, rendering conversations (conversation.h) into token
// ids with a loss mask that keeps the assistant's tokens only:
//   llama3: <|begin_of_text|> then per message <|start_header_id|> role
//           <|end_header_id|> "\n\n" content <|eot_id|> (content stripped of
//           ASCII white space, as Meta's llama-models ChatFormat does);
//   chatml: BOS then per message <|im_start|> "role\n" content <|im_end|> "\n"
//           (Qwen's tokenizer has no BOS: the conversation ends with EOS).
// Each part is encoded on its own, so a mask boundary never falls inside a
// token. Kept: an assistant message's content and its end-of-turn token; not
// BOS, EOS, headers, nor other roles' tokens. Invariant: ids and kept are
// equally long, and every conversation is bracketed as a document is
// (Tokenizer::encode_document): BOS first if the tokenizer has one, else EOS
// last, so document masking finds its boundary. The same format as a Jinja
// chat template (what transformers' apply_chat_template renders) gives the
// text of these ids.
// docs/data.md#conversations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/conversation.h"

namespace llm {

class Tokenizer;

enum class ChatFormat { llama3, chatml };

// Token ids and, per id, 1 when it is a training target, else 0.
struct MaskedTokens {
  std::vector<int> ids;
  std::vector<uint8_t> kept;
};

class ChatTemplate {
 public:
  // The format `name` names ("llama3" or "chatml"), or, when it is empty, the
  // one whose special tokens `tokenizer` has (Llama 3's first). Throws one
  // line when the tokenizer lacks the tokens. `tokenizer` must outlive it.
  static ChatTemplate for_tokenizer(const Tokenizer& tokenizer, const std::string& name);
  // Whether `tokenizer` has the special tokens of either format.
  static bool has_format(const Tokenizer& tokenizer);

  ChatFormat format() const { return format_; }
  const char* name() const;
  // Replaces out with the conversation's ids and mask.
  void render(const std::vector<ChatMessage>& conversation, MaskedTokens& out) const;
  // BOS (if any), a user turn holding `prompt` and the assistant's header: what a model
  // fine-tuned on render's output continues with its reply.
  std::vector<int> render_prompt(std::string_view prompt) const;
  // Where the assistant's reply ends (<|eot_id|> or <|im_end|>).
  int end_of_turn_id() const { return end_of_turn_; }
  // The format as a Hugging Face chat template (Jinja, for
  // tokenizer_config.json): `messages` render to the text of render's ids
  // (special tokens as their text), and one user message with
  // add_generation_prompt to the text of render_prompt's.
  std::string hf_chat_template() const;

 private:
  ChatTemplate(const Tokenizer& tokenizer, ChatFormat format);
  void append_header(ChatRole role, MaskedTokens& out) const;
  void append_turn(const ChatMessage& message, MaskedTokens& out) const;

  const Tokenizer* tokenizer_;
  ChatFormat format_;
  int start_of_header_, end_of_header_ = -1, end_of_turn_;  // end_of_header_: llama3 only
};

}  // namespace llm
