// Loss masks beside token shards (data/loss_mask.h) as the DataLoader reads
// them: dropped targets read as kIgnoredTarget at exactly the masked tokens,
// kept_targets counts what read keeps, a shard without a mask keeps every
// target, masks matched by a glob are not taken for shards, and a mask that
// does not fit its shard is an error naming it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/loader.h"
#include "data/loss_mask.h"
#include "data/shard.h"
#include "base/error.h"
#include "base/file_io.h"
#include "data/targets.h"
#include "test/temp_dir.h"

namespace llm {
namespace {

using test_support::TempDir;

// Token i of shard s is s * 1000 + i; the mask keeps token i unless i % 5 == 2.
std::vector<uint32_t> labelled(size_t count, uint32_t first) {
  std::vector<uint32_t> tokens(count);
  for (size_t i = 0; i < count; ++i) tokens[i] = first + static_cast<uint32_t>(i);
  return tokens;
}
bool kept_at(int64_t offset) { return offset % 5 != 2; }

TEST(LossMask, DroppedTargetsReadAsIgnoredAtTheirTokens) {
  TempDir dir("llm_test_loss_mask_");
  // Shard 0 has a mask, shard 1 none: it keeps every target.
  const std::string masked = dir.file("train_0.bin"), plain = dir.file("train_1.bin");
  shard_write(masked, labelled(41, 0), 10000);
  shard_write(plain, labelled(41, 1000), 10000);
  std::vector<uint8_t> kept(41);
  for (int i = 0; i < 41; ++i) kept[i] = kept_at(i);
  loss_mask_write(masked, kept);

  const int T = 4;
  DataLoader loader(dir.file("train_*"), T, 10000, 5, /*shuffle=*/true);
  EXPECT_TRUE(loader.drops_targets());
  ASSERT_EQ(loader.num_samples(), 20);  // the mask file is no shard
  const int n = 20;
  std::vector<int32_t> inputs(n * T), targets(n * T);
  loader.read(0, n, inputs.data(), targets.data());
  int64_t kept_count = 0, dropped = 0;
  for (int i = 0; i < n * T; ++i) {
    const int32_t next = inputs[i] + 1;  // the target's token
    const bool from_masked = next < 1000;
    const bool keep = !from_masked || kept_at(next);
    EXPECT_EQ(targets[i], keep ? next : kIgnoredTarget) << "target of token " << inputs[i];
    kept_count += keep;
    dropped += !keep;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(loader.kept_targets(0, n), kept_count);
  // A part of the stream, at another epoch: the same count as read gives.
  loader.read(n + 3, 7, inputs.data(), targets.data());
  int64_t kept_part = 0;
  for (int i = 0; i < 7 * T; ++i) kept_part += targets[i] != kIgnoredTarget;
  EXPECT_EQ(loader.kept_targets(n + 3, 7), kept_part);
}

TEST(LossMask, WithoutMasksEveryTargetIsKept) {
  TempDir dir("llm_test_loss_mask_");
  shard_write(dir.file("train_0.bin"), labelled(41, 0), 10000);
  DataLoader loader(dir.file("train_*"), 4, 10000, 5, true);
  EXPECT_FALSE(loader.drops_targets());
  EXPECT_EQ(loader.kept_targets(3, 6), 6 * 4);
}

// Document masking: the target that begins the next document is the
// prediction across a boundary and is dropped, with or without a mask. With
// a BOS that target is the BOS; without one (Qwen) it is the token after EOS.
TEST(LossMask, DocumentStartTargetsAreDroppedWithDocumentMasking) {
  TempDir dir("llm_test_loss_mask_");
  std::vector<uint32_t> tokens(41);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = i % 7 == 0 ? 1 : 2 + i % 5;  // 1 marks
  shard_write(dir.file("train_0.bin"), tokens, 100);
  for (bool token_ends_document : {false, true}) {
    SCOPED_TRACE(token_ends_document ? "1 is EOS" : "1 is BOS");
    DataLoader loader(dir.file("train_0.bin"), 8, 100, 5, false);
    loader.set_document_boundary({1, token_ends_document});
    EXPECT_TRUE(loader.drops_targets());
    std::vector<int32_t> inputs(5 * 8), targets(5 * 8);
    loader.read(0, 5, inputs.data(), targets.data());
    int64_t kept = 0;
    for (size_t i = 0; i < targets.size(); ++i) {
      const uint32_t next = tokens[i + 1];  // samples in file order: token i + 1 is target i
      const bool crosses = token_ends_document ? tokens[i] == 1 : next == 1;
      EXPECT_EQ(targets[i], crosses ? kIgnoredTarget : static_cast<int32_t>(next)) << i;
      kept += !crosses;
    }
    EXPECT_LT(kept, 40);
    EXPECT_EQ(loader.kept_targets(0, 5), kept);
  }
}

TEST(LossMask, MaskOfAnotherLengthIsAnErrorNamingIt) {
  TempDir dir("llm_test_loss_mask_");
  const std::string shard = dir.file("train_0.bin");
  shard_write(shard, labelled(41, 0), 10000);
  loss_mask_write(shard, std::vector<uint8_t>(40, 1));
  try {
    DataLoader loader(shard, 4, 10000, 5, true);
    ADD_FAILURE() << "a mask of 40 tokens beside a shard of 41 opened";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(loss_mask_path(shard)), std::string::npos) << message;
    EXPECT_NE(message.find("40 tokens"), std::string::npos) << message;
  }
}

TEST(LossMask, ByteOtherThanZeroOrOneIsAnError) {
  TempDir dir("llm_test_loss_mask_");
  const std::string shard = dir.file("train_0.bin");
  shard_write(shard, labelled(9, 0), 10000);
  std::vector<uint8_t> kept(9, 1);
  loss_mask_write(shard, kept);
  std::string bytes = read_file(loss_mask_path(shard));
  bytes[bytes.size() - 3] = 7;  // token 6's byte
  write_file_atomically(loss_mask_path(shard), bytes);
  DataLoader loader(shard, 8, 10000, 5, false);
  std::vector<int32_t> inputs(8), targets(8);
  EXPECT_THROW(loader.read(0, 1, inputs.data(), targets.data()), Error);
}

}  // namespace
}  // namespace llm
