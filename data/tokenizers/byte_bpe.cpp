// ByteBpe: the merge loop keeps the piece as a linked list of tokens and a
// heap of candidate pairs ordered by (rank, position); a popped pair that no
// longer stands (either side merged since) is skipped. This is the
// lowest-rank-leftmost rule of both references in O(n log n), so a piece of a
// megabyte of punctuation costs no more than its size.
#include "data/tokenizers/byte_bpe.h"

#include <algorithm>
#include <queue>

#include "data/tokenizers/unicode_nfc.h"
#include "base/error.h"

namespace llm {
namespace {

uint64_t pair_key(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

ByteBpe::ByteBpe(ByteBpeVocab vocab, const std::string& origin)
    : whole_piece_lookup_(vocab.whole_piece_lookup), split_(vocab.split), nfc_(vocab.nfc) {
  const int base = static_cast<int>(vocab.tokens.size());
  vocab_size_ = base;
  for (const ByteBpeVocab::Special& special : vocab.specials) {
    LLM_CHECK(special.id >= base, "{}: special token {} has id {}, inside the {} ordinary tokens",
              origin, special.text, special.id, base);
    vocab_size_ = std::max(vocab_size_, special.id + 1);
  }
  id_text_ = std::move(vocab.tokens);
  id_text_.resize(static_cast<size_t>(vocab_size_));
  std::vector<bool> is_special(static_cast<size_t>(vocab_size_), false);
  for (const ByteBpeVocab::Special& special : vocab.specials) {
    LLM_CHECK(!is_special[static_cast<size_t>(special.id)], "{}: special id {} given twice", origin,
              special.id);
    is_special[static_cast<size_t>(special.id)] = true;
    id_text_[static_cast<size_t>(special.id)] = special.text;
    if (special.text == vocab.bos) bos_id_ = special.id;
    if (special.text == vocab.eos) eos_id_ = special.id;
  }
  for (const ByteBpeVocab::Special& special : vocab.specials) {
    special_of_text_.emplace(id_text_[static_cast<size_t>(special.id)], special.id);
  }
  LLM_CHECK(eos_id_ >= 0, "{}: no special token {} to end documents with", origin, vocab.eos);
  LLM_CHECK(vocab.bos.empty() || bos_id_ >= 0, "{}: no special token {} to begin documents with",
            origin, vocab.bos);
  std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
  token_of_bytes_.reserve(static_cast<size_t>(base));
  for (int id = 0; id < base; ++id) {
    const std::string& bytes = id_text_[static_cast<size_t>(id)];
    LLM_CHECK(!bytes.empty(), "{}: token {} is empty", origin, id);
    const auto [it, added] = token_of_bytes_.emplace(bytes, id);
    LLM_CHECK(added, "{}: tokens {} and {} are the same bytes", origin, it->second, id);
    if (bytes.size() == 1) byte_token_[static_cast<uint8_t>(bytes[0])] = id;
  }
  for (int byte = 0; byte < 256; ++byte) {
    LLM_CHECK(byte_token_[byte] >= 0,
              "{}: no token for the byte 0x{:02X}: a byte-level BPE needs "
              "all 256",
              origin, byte);
  }
  merge_of_pair_.reserve(vocab.merges.size());
  for (size_t index = 0; index < vocab.merges.size(); ++index) {
    const ByteBpeVocab::Merge& m = vocab.merges[index];
    for (int id : {m.left, m.right, m.merged}) {
      LLM_CHECK(id >= 0 && id < base, "{}: merge {} names token {}, not an ordinary token", origin,
                index, id);
    }
    LLM_CHECK(m.rank >= 0, "{}: merge {} has a negative rank", origin, index);
    merge_of_pair_.emplace(pair_key(m.left, m.right),
                           (static_cast<uint64_t>(m.rank) << 32) | static_cast<uint32_t>(m.merged));
  }
}

int ByteBpe::special_id(std::string_view text) const {
  const auto found = special_of_text_.find(text);
  return found == special_of_text_.end() ? -1 : found->second;
}

void ByteBpe::encode(std::string_view text, std::vector<int>& out) const {
  std::string normalized;
  if (nfc_) {
    normalized = nfc(text);
    text = normalized;
  }
  split_pieces(text, split_, [&](std::string_view piece) {
    if (whole_piece_lookup_) {
      const auto found = token_of_bytes_.find(piece);
      if (found != token_of_bytes_.end()) {
        out.push_back(found->second);
        return;
      }
    }
    merge_piece(piece, out);
  });
}

void ByteBpe::merge_piece(std::string_view piece, std::vector<int>& out) const {
  const int n = static_cast<int>(piece.size());
  if (n == 1) {
    out.push_back(byte_token_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  struct Candidate {
    uint64_t rank_and_position;  // rank << 32 | left position: the heap's order
    int right;                   // right position when pushed
    int left_token, right_token;
    bool operator>(const Candidate& o) const { return rank_and_position > o.rank_and_position; }
  };
  thread_local std::vector<int> token, next, previous;
  thread_local std::vector<Candidate> heap;  // a min-heap through std::greater
  const auto at = [](int i) { return static_cast<size_t>(i); };
  token.resize(at(n));
  next.resize(at(n));
  previous.resize(at(n));
  heap.clear();
  auto push_pair = [&](int left) {
    const int right = next[at(left)];
    if (right >= n) return;
    const int a = token[at(left)], b = token[at(right)];
    const auto found = merge_of_pair_.find(pair_key(a, b));
    if (found == merge_of_pair_.end()) return;
    const uint64_t rank = found->second >> 32;
    heap.push_back({(rank << 32) | static_cast<uint32_t>(left), right, a, b});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int i = 0; i < n; ++i) {
    token[at(i)] = byte_token_[static_cast<uint8_t>(piece[at(i)])];
    next[at(i)] = i + 1;
    previous[at(i)] = i - 1;
  }
  for (int i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate c = heap.back();
    heap.pop_back();
    const int left = static_cast<int>(c.rank_and_position & 0xFFFFFFFFu);
    // Stale: a side was merged away or into something else since the push.
    if (token[at(left)] != c.left_token || next[at(left)] != c.right ||
        token[at(c.right)] != c.right_token) {
      continue;
    }
    const uint64_t merge = merge_of_pair_.find(pair_key(c.left_token, c.right_token))->second;
    token[at(left)] = static_cast<int>(merge & 0xFFFFFFFFu);
    token[at(c.right)] = -1;  // merged away
    const int after = next[at(c.right)];
    next[at(left)] = after;
    if (after < n) previous[at(after)] = left;
    if (previous[at(left)] >= 0) push_pair(previous[at(left)]);
    push_pair(left);
  }
  for (int i = 0; i < n; i = next[at(i)]) out.push_back(token[at(i)]);
}

std::string ByteBpe::decode(const std::vector<int>& ids) const {
  std::string text;
  for (int id : ids) {
    LLM_CHECK(id >= 0 && id < vocab_size_, "tokenizer: cannot decode id {}: vocab size is {}", id,
              vocab_size_);
    text += id_text_[static_cast<size_t>(id)];
  }
  return text;
}

}  // namespace llm
