// Token shards in llm.c's layout: a 256 x int32 header (magic, version, token
// count) followed by the tokens, uint16 (magic 20240520, version 1) or uint32
// (magic 20240801, version 7) for vocabularies over 65,536. Invariant: a Shard
// that opened has a valid header and exactly header + count * token_bytes bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llm {

inline constexpr int kShardHeaderInts = 256;
inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardVersionU16 = 1;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 7;

// Writes tokens to path (uint16 when vocab_size <= 65536, else uint32) through
// path + ".tmp", fsync and rename, so path never holds a half-written shard.
void shard_write(const std::string& path, const std::vector<uint32_t>& tokens, int vocab_size);

// A read-only, memory-mapped shard.
class Shard {
 public:
  static Shard open(const std::string& path);

  Shard(Shard&& other) noexcept;
  Shard& operator=(Shard&& other) noexcept;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;
  ~Shard();

  int64_t num_tokens() const { return num_tokens_; }
  int token_bytes() const { return token_bytes_; }
  const std::string& path() const { return path_; }

  // Scans every token; throws naming the file and the first position whose
  // token is >= vocab_size (the model's vocabulary, model.vocab_size).
  void check_tokens_below(int vocab_size) const;

  // Copies tokens [start, start + count) into out; each must be < vocab_size.
  void read(int64_t start, int64_t count, int32_t* out, int vocab_size) const;

 private:
  Shard() = default;
  void unmap();
  uint32_t token(int64_t offset) const;

  std::string path_;
  const uint8_t* mapping_ = nullptr;  // the whole file
  size_t mapping_bytes_ = 0;
  int64_t num_tokens_ = 0;
  int token_bytes_ = 0;  // 2 or 4
};

}  // namespace llm
