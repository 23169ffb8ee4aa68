// What a checkpoint saves of the model state (see saved_state.h).
#include "parallel/saved_state.h"

namespace llm {

size_t saved_state_bytes(const std::vector<UnitShard>& shards) {
  size_t owned = 0;
  for (const UnitShard& s : shards) owned += s.owned;
  return owned * kSavedBytesPerElement;
}

std::vector<int> checkpoint_writer_ranks(int T, int D, int P, int S) {
  std::vector<int> ranks;
  for (int p = 0; p < P; ++p) {
    for (int d = 0; d < S; ++d) {
      for (int t = 0; t < T; ++t) ranks.push_back(t + T * (d + D * p));
    }
  }
  return ranks;
}

}  // namespace llm
