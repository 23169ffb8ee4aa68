// Endless stream of training samples over a set of token shards. A sample is
// seq_len + 1 consecutive tokens inside one shard (sample k of a shard starts at
// token k * seq_len); samples are numbered globally in file order. Invariant:
// stream position j is a pure function of (files, seq_len, seed, shuffle, j):
// epoch e = j / num_samples visits every sample exactly once, in a Fisher-Yates
// order seeded by (seed, e), so the trainer's step alone resumes it exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/shard.h"

namespace llm {

class DataLoader {
 public:
  // pattern: a path or a glob(3) pattern; matches are sorted, all opened and
  // scanned once: a token >= vocab_size is an error naming shard and offset.
  DataLoader(const std::string& pattern, int seq_len, int vocab_size, uint64_t seed, bool shuffle);

  // Fills inputs and targets, each (count, seq_len), with the samples at stream
  // positions [stream_position, stream_position + count); targets are the
  // inputs shifted by one token.
  void read(int64_t stream_position, int count, int32_t* inputs, int32_t* targets);

  int64_t num_samples() const { return num_samples_; }
  int seq_len() const { return seq_len_; }

 private:
  int64_t sample_at(int64_t stream_position);
  void read_sample(int64_t sample, int32_t* tokens) const;  // seq_len + 1 tokens

  std::string pattern_;
  int seq_len_;
  int vocab_size_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<Shard> shards_;
  std::vector<int64_t> first_sample_;  // per shard, plus the total at the end
  int64_t num_samples_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> cached_permutation_;  // of cached_epoch_
  std::vector<int32_t> sample_buffer_;       // seq_len + 1 tokens
};

}  // namespace llm
