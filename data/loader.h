// Endless stream of training samples over a set of token shards. A sample is
// seq_len + 1 consecutive tokens inside one shard (sample k of a shard starts at
// token k * seq_len); samples are numbered globally in file order. Invariant:
// stream position j is a pure function of (files, seq_len, seed, shuffle, j):
// epoch e = j / num_samples visits every sample exactly once, in a Fisher-Yates
// order seeded by (seed, e), so the trainer's step alone resumes it exactly.
// A shard with a loss mask beside it (data/loss_mask.h) drops the targets its
// mask drops: they read as kIgnoredTarget (data/targets.h), and so does,
// with document masking, each target that starts a document (the prediction
// across a boundary).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/loss_mask.h"
#include "data/shard.h"
#include "data/document_boundary.h"

namespace llm {

class DataLoader {
 public:
  // pattern: a path or a glob(3) pattern; matches are sorted, all opened and
  // scanned once: a token >= vocab_size is an error naming shard and offset.
  // Matches that are loss masks (<shard>.mask) are not shards; each shard's
  // mask is opened beside it when there is one.
  DataLoader(const std::string& pattern, int seq_len, int vocab_size, uint64_t seed, bool shuffle);

  // Fills inputs and targets, each (count, seq_len), with the samples at stream
  // positions [stream_position, stream_position + count); targets are the
  // inputs shifted by one token, kIgnoredTarget where a loss mask drops them.
  void read(int64_t stream_position, int count, int32_t* inputs, int32_t* targets);
  // The targets read() would keep (not kIgnoredTarget) at those positions;
  // count * seq_len without reading when none is dropped.
  int64_t kept_targets(int64_t stream_position, int count);

  // Document masking: a target that begins the next document (at BOS, or
  // after EOS for a tokenizer without BOS) is not trained on.
  void set_document_boundary(DocumentBoundary boundary) { boundary_ = boundary; }

  // Whether some target may be dropped: some shard has a loss mask, or
  // document masking is on.
  bool drops_targets() const { return has_loss_masks_ || boundary_.token >= 0; }
  int64_t num_samples() const { return num_samples_; }
  int seq_len() const { return seq_len_; }

 private:
  int64_t sample_at(int64_t stream_position);
  // Sample `sample`: its seq_len + 1 tokens, and in kept whether each of its
  // seq_len targets is trained on (its mask byte, 0 at a document start).
  void read_sample(int64_t sample, int32_t* tokens, uint8_t* kept);

  std::string pattern_;
  int seq_len_;
  int vocab_size_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<Shard> shards_;
  std::vector<std::optional<LossMask>> masks_;  // per shard
  bool has_loss_masks_ = false;
  DocumentBoundary boundary_;          // token -1: no document masking
  std::vector<int64_t> first_sample_;  // per shard, plus the total at the end
  int64_t num_samples_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> cached_permutation_;  // of cached_epoch_
  std::vector<int32_t> sample_buffer_;       // seq_len + 1 tokens
  std::vector<uint8_t> kept_buffer_;         // seq_len targets' mask bytes
};

}  // namespace llm
