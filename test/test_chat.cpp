// Conversations (docs/data.md#conversations): the chat formats' ids and masks
// against hand-written expectations on the fixture byte-level BPE (the text
// pieces' ids worked out from test/data/tokenizers/bpe.tiktoken's ranks by
// hand, the specials' from Llama 3's order), the choice of format, prepare
// --chat's shards and masks across shard boundaries, and malformed records:
// one line naming the file, line and field, and nothing written.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/conversation.h"
#include "data/loss_mask.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "error_of.h"
#include "base/file_io.h"
#include "test/temp_dir.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
using test_support::error_of;
using test_support::TempDir;
constexpr char kTempPrefix[] = "llm_test_chat_";
constexpr char kTiktoken[] = "test/data/tokenizers/bpe.tiktoken";

// The fixture's ids: specials follow its 2000 ranks in Llama 3's order.
constexpr int kBeginOfText = 2000, kStartHeader = 2006, kEndHeader = 2007, kEndOfTurn = 2009;
// Text pieces, each the BPE of its bytes over the fixture's ranks.
const std::vector<int> kSystem = {82, 88, 260, 385}, kUser = {463, 263},
                       kAssistant = {657, 1162, 329, 83}, kTwoNewlines = {317}, kNewline = {198},
                       kBeBrief = {33, 68, 277, 81, 666, 69, 13},  // "Be", " brief", "."
    kHi = {39, 72}, kHelloThere = {39, 560, 284, 1727, 0};         // "Hello", " there", "!"

// Appends `ids` to expected.ids, each with mask byte `kept`.
void add(MaskedTokens& expected, const std::vector<int>& ids, uint8_t kept) {
  expected.ids.insert(expected.ids.end(), ids.begin(), ids.end());
  expected.kept.insert(expected.kept.end(), ids.size(), kept);
}

const std::vector<ChatMessage> kConversation = {{ChatRole::system, "Be brief."},
                                                {ChatRole::user, " Hi \n"},
                                                {ChatRole::assistant, "Hello there!"}};

TEST(ChatTemplate, Llama3KeepsTheAssistantsContentAndEndOfTurn) {
  const Tokenizer tokenizer = Tokenizer::load(kTiktoken);
  const ChatTemplate chat = ChatTemplate::for_tokenizer(tokenizer, "");
  EXPECT_EQ(chat.format(), ChatFormat::llama3);
  EXPECT_EQ(chat.end_of_turn_id(), kEndOfTurn);
  MaskedTokens expected;
  add(expected, {kBeginOfText, kStartHeader}, 0);
  add(expected, kSystem, 0);
  add(expected, {kEndHeader}, 0);
  add(expected, kTwoNewlines, 0);
  add(expected, kBeBrief, 0);
  add(expected, {kEndOfTurn, kStartHeader}, 0);
  add(expected, kUser, 0);
  add(expected, {kEndHeader}, 0);
  add(expected, kTwoNewlines, 0);
  add(expected, kHi, 0);  // " Hi \n" stripped, as Meta's ChatFormat does
  add(expected, {kEndOfTurn, kStartHeader}, 0);
  add(expected, kAssistant, 0);
  add(expected, {kEndHeader}, 0);
  add(expected, kTwoNewlines, 0);
  add(expected, kHelloThere, 1);
  add(expected, {kEndOfTurn}, 1);
  MaskedTokens rendered;
  chat.render(kConversation, rendered);
  EXPECT_EQ(rendered.ids, expected.ids);
  EXPECT_EQ(rendered.kept, expected.kept);

  // The prompt of generate --chat: a user's turn, then the assistant's header.
  MaskedTokens prompt;
  add(prompt, {kBeginOfText, kStartHeader}, 0);
  add(prompt, kUser, 0);
  add(prompt, {kEndHeader}, 0);
  add(prompt, kTwoNewlines, 0);
  add(prompt, kHi, 0);
  add(prompt, {kEndOfTurn, kStartHeader}, 0);
  add(prompt, kAssistant, 0);
  add(prompt, {kEndHeader}, 0);
  add(prompt, kTwoNewlines, 0);
  EXPECT_EQ(chat.render_prompt("Hi"), prompt.ids);
}

// The fixture tokenizer.json with two specials renamed to ChatML's (ids 2006
// and 2007), so that it has ChatML's tokens and not Llama 3's.
std::string write_chatml_tokenizer(const TempDir& dir) {
  std::string json = read_file("test/data/tokenizers/tokenizer.json");
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"<|start_header_id|>", "<|im_start|>"},
        {"<|end_header_id|>", "<|im_end|>"}}) {
    const size_t at = json.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    json.replace(at, from.size(), to);
  }
  const std::string path = dir.file("chatml_tokenizer.json");
  write_file_atomically(path, json);
  return path;
}

TEST(ChatTemplate, ChatmlKeepsTheAssistantsContentAndEndOfTurnNotTheNewlineAfter) {
  TempDir dir(kTempPrefix);
  const Tokenizer tokenizer = Tokenizer::load(write_chatml_tokenizer(dir));
  const ChatTemplate chat = ChatTemplate::for_tokenizer(tokenizer, "");
  EXPECT_EQ(chat.format(), ChatFormat::chatml);
  constexpr int kImStart = 2006, kImEnd = 2007;
  EXPECT_EQ(chat.end_of_turn_id(), kImEnd);
  MaskedTokens expected;
  add(expected, {kBeginOfText, kImStart}, 0);
  add(expected, kUser, 0);
  add(expected, kNewline, 0);
  add(expected, kHi, 0);  // not stripped: Qwen's template writes content as it is
  add(expected, {kImEnd}, 0);
  add(expected, kNewline, 0);
  add(expected, {kImStart}, 0);
  add(expected, kAssistant, 0);
  add(expected, kNewline, 0);
  add(expected, kHelloThere, 1);
  add(expected, {kImEnd}, 1);
  add(expected, kNewline, 0);
  MaskedTokens rendered;
  chat.render({{ChatRole::user, "Hi"}, {ChatRole::assistant, "Hello there!"}}, rendered);
  EXPECT_EQ(rendered.ids, expected.ids);
  EXPECT_EQ(rendered.kept, expected.kept);
}

// Qwen's tokenizer has ChatML's tokens and no BOS: a conversation is its
// turns then <|endoftext|> (not a target), so document masking finds where it
// ends; a prompt starts at its first turn, as transformers renders Qwen's.
TEST(ChatTemplate, ChatmlWithoutBosEndsTheConversationWithEos) {
  const Tokenizer tokenizer = Tokenizer::load("test/data/tokenizers/qwen2_tokenizer.json");
  ASSERT_EQ(tokenizer.bos_id(), -1);
  const ChatTemplate chat = ChatTemplate::for_tokenizer(tokenizer, "");
  EXPECT_EQ(chat.format(), ChatFormat::chatml);
  const int im_start = tokenizer.special_id("<|im_start|>");
  const int im_end = tokenizer.special_id("<|im_end|>");
  const auto text = [&](const char* part) { return tokenizer.encode(part); };
  MaskedTokens expected;
  add(expected, {im_start}, 0);
  add(expected, text("user"), 0);
  add(expected, text("\n"), 0);
  add(expected, text("Hi"), 0);
  add(expected, {im_end}, 0);
  add(expected, text("\n"), 0);
  add(expected, {im_start}, 0);
  add(expected, text("assistant"), 0);
  add(expected, text("\n"), 0);
  const std::vector<int> prompt = expected.ids;  // the user turn and the assistant's header
  add(expected, text("Hello there!"), 1);
  add(expected, {im_end}, 1);
  add(expected, text("\n"), 0);
  add(expected, {tokenizer.eos_id()}, 0);
  MaskedTokens rendered;
  chat.render({{ChatRole::user, "Hi"}, {ChatRole::assistant, "Hello there!"}}, rendered);
  EXPECT_EQ(rendered.ids, expected.ids);
  EXPECT_EQ(rendered.kept, expected.kept);
  EXPECT_EQ(chat.render_prompt("Hi"), prompt);
}

TEST(ChatTemplate, AFormatTheTokenizerCannotWriteIsOneLineNamingIt) {
  TempDir dir(kTempPrefix);
  const Tokenizer llama3 = Tokenizer::load(kTiktoken);
  EXPECT_CONTAINS(error_of([&] { ChatTemplate::for_tokenizer(llama3, "chatml"); }),
                  "neither Llama 3's special tokens");
  EXPECT_CONTAINS(error_of([&] { ChatTemplate::for_tokenizer(llama3, "vicuna"); }),
                  "chat format 'vicuna': expected llama3 or chatml");
  const Tokenizer chatml = Tokenizer::load(write_chatml_tokenizer(dir));
  EXPECT_CONTAINS(error_of([&] { ChatTemplate::for_tokenizer(chatml, "llama3"); }),
                  "no Llama 3 chat format: it lacks one of <|start_header_id|>");
  const Tokenizer sentencepiece = Tokenizer::load("test/data/tokenizers/sentencepiece.model");
  const std::string error = error_of([&] { ChatTemplate::for_tokenizer(sentencepiece, ""); });
  EXPECT_CONTAINS(error, "sentencepiece.model: no chat format: it has neither");
  EXPECT_CONTAINS(error, "<|im_start|>, <|im_end|>");
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

std::vector<int> read_shard(const std::string& path) {
  const Shard shard = Shard::open(path);
  std::vector<int32_t> tokens(static_cast<size_t>(shard.num_tokens()));
  shard.read(0, shard.num_tokens(), tokens.data(), 1 << 30);
  return {tokens.begin(), tokens.end()};
}

std::vector<uint8_t> read_mask(const std::string& shard_path, int64_t tokens) {
  const std::optional<LossMask> mask = LossMask::open_beside(shard_path, tokens);
  EXPECT_TRUE(mask.has_value()) << "no mask beside " << shard_path;
  std::vector<uint8_t> kept(static_cast<size_t>(tokens));
  if (mask) mask->read(0, tokens, kept.data());
  return kept;
}

PrepareOptions chat_options(const TempDir& dir, const std::string& input) {
  PrepareOptions options;
  options.inputs = {input};
  options.out_dir = dir.file("out");
  options.tokenizer = kTiktoken;
  options.val_fraction = 0;
  options.quiet = true;
  options.chat = true;
  return options;
}

TEST(PrepareChat, ShardsAndMasksHoldTheRenderedConversationsInOrder) {
  TempDir dir(kTempPrefix);
  write_file_atomically(
      dir.file("chats.jsonl"),
      "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
      "\"content\": \" Hi \\n\"}, {\"role\": \"assistant\", \"content\": \"Hello there!\", "
      "\"weight\": 1}], \"id\": 7}\n"
      "\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
      "\"content\": \"Hello there!\"}]}\n");
  PrepareOptions options = chat_options(dir, dir.file("chats.jsonl"));
  options.shard_tokens = 16;  // masks split with their shards
  prepare_dataset(options);

  MaskedTokens expected;
  const Tokenizer tokenizer = Tokenizer::load(kTiktoken);
  const ChatTemplate chat = ChatTemplate::for_tokenizer(tokenizer, "llama3");
  for (const auto& conversation :
       {kConversation, {{ChatRole::user, "Hi"}, {ChatRole::assistant, "Hello there!"}}}) {
    MaskedTokens rendered;
    chat.render(conversation, rendered);
    add(expected, rendered.ids, 0);
    expected.kept.resize(expected.ids.size() - rendered.ids.size());
    expected.kept.insert(expected.kept.end(), rendered.kept.begin(), rendered.kept.end());
  }
  MaskedTokens written;
  for (int shard = 0; fs::exists(dir.file(fmt::format("out/train_{:03d}.bin", shard))); ++shard) {
    const std::string path = dir.file(fmt::format("out/train_{:03d}.bin", shard));
    const std::vector<int> ids = read_shard(path);
    const std::vector<uint8_t> kept = read_mask(path, static_cast<int64_t>(ids.size()));
    EXPECT_LE(ids.size(), 16u);
    written.ids.insert(written.ids.end(), ids.begin(), ids.end());
    written.kept.insert(written.kept.end(), kept.begin(), kept.end());
  }
  EXPECT_EQ(written.ids, expected.ids);
  EXPECT_EQ(written.kept, expected.kept);
  EXPECT_GT(written.ids.size(), 16u);

  // Text prepared into the same directory leaves no stale mask behind.
  write_file_atomically(dir.file("text.jsonl"), "{\"text\": \"Hi\"}\n");
  PrepareOptions text = options;
  text.inputs = {dir.file("text.jsonl")};
  text.chat = false;
  prepare_dataset(text);
  EXPECT_TRUE(fs::exists(dir.file("out/train_000.bin")));
  EXPECT_FALSE(fs::exists(dir.file("out/train_000.bin.mask")));
  EXPECT_FALSE(fs::exists(dir.file("out/train_001.bin.mask")));
}

TEST(PrepareChat, AMalformedRecordIsOneLineNamingFileLineAndFieldAndWritesNothing) {
  const std::string good =
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
      "\"content\": \"Hello\"}]}";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"messages\": [", ":2: not valid JSON"},
      {"{\"text\": \"Hi\"}", ":2: no field 'messages'"},
      {"{\"messages\": {\"role\": \"user\"}}", ":2: messages: expected a non-empty list"},
      {"{\"messages\": []}", ":2: messages: expected a non-empty list"},
      {"{\"messages\": [\"Hi\"]}", ":2: messages[0]: expected an object"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"bot\", "
       "\"content\": \"Hello\"}]}",
       ":2: messages[1].role: 'bot' is not system, user or assistant"},
      {"{\"messages\": [{\"content\": \"Hi\"}]}", ":2: messages[0].role: missing"},
      {"{\"messages\": [{\"role\": \"assistant\", \"content\": 3}]}",
       ":2: messages[0].content: missing or not a string"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}",
       ":2: messages: no assistant message"},
  };
  for (const auto& [record, message] : cases) {
    TempDir dir(kTempPrefix);
    // Between good records: prepare stops before it creates the output.
    write_file_atomically(dir.file("chats.jsonl"), good + "\n" + record + "\n" + good + "\n");
    const std::string error =
        error_of([&] { prepare_dataset(chat_options(dir, dir.file("chats.jsonl"))); });
    EXPECT_CONTAINS(error, dir.file("chats.jsonl") + message);
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_FALSE(fs::exists(dir.file("out"))) << record << " wrote " << dir.file("out");
  }
}

TEST(PrepareChat, NeedsTheModelsTokenizer) {
  TempDir dir(kTempPrefix);
  PrepareOptions options = chat_options(dir, dir.file("chats.jsonl"));
  options.tokenizer.clear();
  EXPECT_CONTAINS(error_of([&] { prepare_dataset(options); }),
                  "conversations need the model's tokenizer");
  options = chat_options(dir, dir.file("chats.jsonl"));
  options.tokenizer = "test/data/tokenizers/sentencepiece.model";
  write_file_atomically(dir.file("chats.jsonl"), "{\"messages\": []}\n");
  EXPECT_CONTAINS(error_of([&] { prepare_dataset(options); }), "no chat format");
  EXPECT_FALSE(fs::exists(dir.file("out")));
}

}  // namespace
}  // namespace llm
