// Loss masks: which tokens of a shard are training targets. A mask lies
// beside its shard as <shard>.mask: a 256 x int32 header (magic 20261126,
// version 1, token count: the shard's), then one byte per token, 1 when the
// token is a target (the loss trains its prediction from the tokens before
// it), 0 when not (a conversation's user turn, say). A shard without a mask
// keeps every target. Invariant: a LossMask that opened has a valid header
// and exactly header + count bytes, count equal to its shard's tokens.
// docs/data.md#loss-masks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace llm {

class FileDescriptor;

inline constexpr int32_t kLossMaskMagic = 20261126;
inline constexpr int32_t kLossMaskVersion = 1;

// Where the mask of the shard at shard_path lives.
std::string loss_mask_path(const std::string& shard_path);
// Whether a file that a data pattern matched is a mask rather than a shard.
bool is_loss_mask_path(const std::string& path);

// Writes kept (one 0/1 byte per token) as the mask of the shard at shard_path,
// atomically (write_file_atomically).
void loss_mask_write(const std::string& shard_path, const std::vector<uint8_t>& kept);

class LossMask {
 public:
  // The mask beside the shard at shard_path, if there is one; throws naming
  // the mask file when it is malformed or its count is not shard_tokens.
  static std::optional<LossMask> open_beside(const std::string& shard_path, int64_t shard_tokens);

  LossMask(LossMask&&) noexcept;
  LossMask& operator=(LossMask&&) noexcept;
  ~LossMask();

  const std::string& path() const { return path_; }
  // Bytes [start, start + count) of the mask into out (1: kept, 0: dropped).
  void read(int64_t start, int64_t count, uint8_t* out) const;

 private:
  LossMask() = default;
  std::string path_;
  int64_t num_tokens_ = 0;
  std::unique_ptr<FileDescriptor> file_;
};

}  // namespace llm
