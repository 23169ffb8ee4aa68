// DataLoader: glob the shards, number their samples, and map stream positions
// to samples through a per-epoch permutation (cached for the current epoch).
// Invariant: samples never cross a shard boundary.
#include "data/loader.h"

#include <glob.h>

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "base/rng.h"
#include "data/targets.h"

namespace llm {
namespace {

std::vector<std::string> glob_sorted(const std::string& pattern) {
  glob_t matches{};
  int status = ::glob(pattern.c_str(), 0, nullptr, &matches);
  std::vector<std::string> paths;
  if (status == 0) paths.assign(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  ::globfree(&matches);
  LLM_CHECK(status == 0 || status == GLOB_NOMATCH, "data pattern {}: glob failed (code {})",
            pattern, status);
  LLM_CHECK(!paths.empty(), "data pattern {}: no file matches", pattern);
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::vector<int64_t> shuffled_samples(int64_t num_samples, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(num_samples));
  for (int64_t i = 0; i < num_samples; ++i) order[i] = i;
  Rng rng(hash_mix(seed, static_cast<uint64_t>(epoch)));
  for (int64_t i = num_samples - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(rng.next_below(static_cast<uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace

DataLoader::DataLoader(const std::string& pattern, int seq_len, int vocab_size, uint64_t seed,
                       bool shuffle)
    : pattern_(pattern),
      seq_len_(seq_len),
      vocab_size_(vocab_size),
      seed_(seed),
      shuffle_(shuffle),
      sample_buffer_(static_cast<size_t>(seq_len) + 1),
      kept_buffer_(static_cast<size_t>(seq_len)) {
  LLM_CHECK(seq_len > 0, "data pattern {}: seq_len {} must be positive", pattern, seq_len);
  LLM_CHECK(vocab_size > 0, "data pattern {}: vocab size {} must be positive", pattern, vocab_size);
  int64_t total_tokens = 0;
  first_sample_.push_back(0);
  for (const std::string& path : glob_sorted(pattern)) {
    if (is_loss_mask_path(path)) continue;  // read beside its shard
    shards_.push_back(Shard::open(path));
    shards_.back().check_tokens_below(vocab_size);  // at start, not when the sample comes up
    const int64_t tokens = shards_.back().num_tokens();
    masks_.push_back(LossMask::open_beside(path, tokens));
    has_loss_masks_ = has_loss_masks_ || masks_.back().has_value();
    total_tokens += tokens;
    num_samples_ += (tokens - 1) / seq_len;
    first_sample_.push_back(num_samples_);
  }
  LLM_CHECK(!shards_.empty(), "data pattern {}: matches only loss masks, no shard", pattern);
  LLM_CHECK(num_samples_ > 0,
            "data pattern {}: no sample fits: {} shard(s) with {} tokens in all, but a sample "
            "needs seq_len + 1 = {} tokens inside one shard",
            pattern, shards_.size(), total_tokens, int64_t{seq_len} + 1);
}

void DataLoader::read(int64_t stream_position, int count, int32_t* inputs, int32_t* targets) {
  LLM_CHECK(stream_position >= 0 && count >= 0,
            "data pattern {}: bad read of {} samples at stream position {}", pattern_, count,
            stream_position);
  for (int row = 0; row < count; ++row) {
    read_sample(sample_at(stream_position + row), sample_buffer_.data(), kept_buffer_.data());
    const size_t offset = static_cast<size_t>(row) * seq_len_;
    std::copy_n(sample_buffer_.begin(), seq_len_, inputs + offset);
    for (int i = 0; i < seq_len_; ++i) {
      targets[offset + i] = kept_buffer_[i] ? sample_buffer_[i + 1] : kIgnoredTarget;
    }
  }
}

int64_t DataLoader::kept_targets(int64_t stream_position, int count) {
  if (!drops_targets()) return static_cast<int64_t>(count) * seq_len_;
  int64_t kept = 0;
  for (int row = 0; row < count; ++row) {
    read_sample(sample_at(stream_position + row), sample_buffer_.data(), kept_buffer_.data());
    for (uint8_t k : kept_buffer_) kept += k;
  }
  return kept;
}

int64_t DataLoader::sample_at(int64_t stream_position) {
  const int64_t index_in_epoch = stream_position % num_samples_;
  if (!shuffle_) return index_in_epoch;
  const int64_t epoch = stream_position / num_samples_;
  if (epoch != cached_epoch_) {
    cached_permutation_ = shuffled_samples(num_samples_, seed_, epoch);
    cached_epoch_ = epoch;
  }
  return cached_permutation_[static_cast<size_t>(index_in_epoch)];
}

void DataLoader::read_sample(int64_t sample, int32_t* tokens, uint8_t* kept) {
  // The shard whose range [first_sample_[s], first_sample_[s + 1]) holds sample.
  auto after = std::upper_bound(first_sample_.begin(), first_sample_.end(), sample);
  const size_t shard = static_cast<size_t>(after - first_sample_.begin()) - 1;
  const int64_t start = (sample - first_sample_[shard]) * seq_len_;
  shards_[shard].read(start, int64_t{seq_len_} + 1, tokens, vocab_size_);
  if (masks_[shard]) {
    masks_[shard]->read(start + 1, seq_len_, kept);  // the targets: tokens 1 .. seq_len
  } else {
    std::fill_n(kept, seq_len_, uint8_t{1});
  }
  if (boundary_.token < 0) return;
  for (int i = 0; i < seq_len_; ++i) {
    if (boundary_.starts_at(tokens, static_cast<size_t>(i) + 1)) kept[i] = 0;
  }
}

}  // namespace llm
