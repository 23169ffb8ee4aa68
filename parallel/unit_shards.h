// What the sharding engine and its parameter and gradient stores share: the
// shard geometry of every unit, the four buffer plans their state is listed
// into before anything is allocated, and the devices and groups they use.
//  - A unit of n elements is padded to P = s * S (S the shard group size,
//    s = ceil(n / S)); shard-group member i owns elements [i*s, i*s + s) ∩ [0, n).
// Invariant: the geometry depends only on (layout, S, member), so every member
// of a group agrees on every unit's padded size and shard size.
#pragma once

#include <cstddef>
#include <vector>

#include "device/arena.h"
#include "model/backend.h"
#include "model/layout.h"
#include "parallel/topology.h"

namespace llm {

struct UnitShard {
  size_t numel;   // n
  size_t shard;   // s
  size_t padded;  // P = s * S
  size_t begin;   // first owned element
  size_t owned;   // owned elements (may be 0 on trailing ranks)
};

std::vector<UnitShard> unit_shards(const ParameterLayout& layout, int group_size, int group_rank);
// The largest P and s over the units (pooled buffers are sized by them).
size_t max_padded(const std::vector<UnitShard>& shards);
size_t max_shard(const std::vector<UnitShard>& shards);

// Bytes held by one rank. `buffers` are communication buffers: the pooled
// gather / gradient buffers of the sharded modes, bf16 send / receive buffers.
// The first four are device memory (total()); `host` is the offloaded
// optimizer's host memory (masters, moments, gradient landing, upload copy).
struct StateBytes {
  size_t params = 0, grads = 0, optimizer = 0, buffers = 0;
  size_t host = 0;
  size_t state() const { return params + grads + optimizer; }
  size_t total() const { return state() + buffers; }
  StateBytes& operator+=(const StateBytes& other) {
    params += other.params;
    grads += other.grads;
    optimizer += other.optimizer;
    buffers += other.buffers;
    host += other.host;
    return *this;
  }
};

// One plan per arena of the engine.
struct StatePlans {
  BufferPlan params, grads, optimizer, buffers;
  StateBytes bytes() const {
    return {params.bytes(), grads.bytes(), optimizer.bytes(), buffers.bytes()};
  }
};

// What a store works with once its buffers are bound.
struct StoreContext {
  const ParameterLayout& layout;
  const std::vector<UnitShard>& shards;
  const Backend& backend;
  Topology& topology;
};

// The full fp32 unit (numel elements) into host `out`, all-gathered over the
// shard group `group` from every member's shard (s elements at `shard`, in
// `memory`); `what` names the temporary device buffer.
void gather_unit_to_host(Group& group, const DeviceMemory& memory, const UnitShard& s,
                         const float* shard, float* out, const char* what);

}  // namespace llm
