// Shard geometry of the units (see unit_shards.h).
#include "parallel/unit_shards.h"

#include <algorithm>

namespace llm {

std::vector<UnitShard> unit_shards(const ParameterLayout& layout, int group_size, int group_rank) {
  std::vector<UnitShard> shards;
  for (const UnitSpec& u : layout.units) {
    UnitShard s;
    s.numel = u.numel;
    s.shard = (u.numel + group_size - 1) / group_size;
    s.padded = s.shard * group_size;
    s.begin = s.shard * group_rank;
    s.owned = s.begin >= u.numel ? 0 : std::min(s.shard, u.numel - s.begin);
    shards.push_back(s);
  }
  return shards;
}

size_t max_padded(const std::vector<UnitShard>& shards) {
  size_t largest = 0;
  for (const UnitShard& s : shards) largest = std::max(largest, s.padded);
  return largest;
}

size_t max_shard(const std::vector<UnitShard>& shards) {
  size_t largest = 0;
  for (const UnitShard& s : shards) largest = std::max(largest, s.shard);
  return largest;
}

void gather_unit_to_host(Group& group, const DeviceMemory& memory, const UnitShard& s,
                         const float* shard, float* out, const char* what) {
  Arena scratch(what, s.padded * sizeof(float), memory);
  float* full = scratch.alloc<float>(s.padded);
  group.all_gather(shard, full, s.shard, WireType::f32);
  memory.to_host(out, full, s.numel * sizeof(float));
}

}  // namespace llm
