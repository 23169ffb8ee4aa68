// The backend-independent parts of group.h: element sizes, traffic accounting,
// the point-to-point peer check and the run-once semantics of CommHandle.
// Invariant: a CommHandle's wait function runs at most once.
#include "collectives/group.h"

#include "base/error.h"

namespace llm {

size_t wire_bytes(WireType type) {
  switch (type) {
    case WireType::f32:
      return 4;
    case WireType::bf16:
      return 2;
  }
  return 0;
}

void CommStats::add(const CommStats& other) {
  calls += other.calls;
  payload_bytes += other.payload_bytes;
  sent_bytes += other.sent_bytes;
  all_reduce_sent += other.all_reduce_sent;
  reduce_scatter_sent += other.reduce_scatter_sent;
  all_gather_sent += other.all_gather_sent;
  broadcast_sent += other.broadcast_sent;
  p2p_sent += other.p2p_sent;
}

Traffic all_reduce_traffic(uint64_t bytes, int n) {
  const uint64_t g = static_cast<uint64_t>(n);
  return {bytes, 2 * (g - 1) * bytes / g};
}

Traffic chunked_traffic(uint64_t chunk_bytes, int n) {
  const uint64_t g = static_cast<uint64_t>(n);
  return {g * chunk_bytes, (g - 1) * chunk_bytes};
}

// Every member counts the root's send (the payload), so stats agree across members.
Traffic broadcast_traffic(uint64_t bytes, int n) { return {bytes, n > 1 ? bytes : 0}; }

Traffic p2p_traffic(uint64_t bytes) { return {bytes, bytes}; }

void Group::count(Traffic traffic, uint64_t& collective_sent) {
  stats_.calls += 1;
  stats_.payload_bytes += traffic.payload;
  stats_.sent_bytes += traffic.sent;
  collective_sent += traffic.sent;
}

void Group::count_all_reduce(size_t count, WireType type) {
  this->count(all_reduce_traffic(count * wire_bytes(type), size()), stats_.all_reduce_sent);
}

void Group::count_reduce_scatter(size_t recv_count, WireType type) {
  count(chunked_traffic(recv_count * wire_bytes(type), size()), stats_.reduce_scatter_sent);
}

void Group::count_all_gather(size_t send_count, WireType type) {
  count(chunked_traffic(send_count * wire_bytes(type), size()), stats_.all_gather_sent);
}

void Group::count_broadcast(size_t count, WireType type) {
  this->count(broadcast_traffic(count * wire_bytes(type), size()), stats_.broadcast_sent);
}

void Group::count_send(size_t count, WireType type) {
  this->count(p2p_traffic(count * wire_bytes(type)), stats_.p2p_sent);
}

void Group::check_peer(const char* op, int peer) const {
  LLM_CHECK(peer >= 0 && peer < size(), "{}: peer {} is outside the group of {}", op, peer, size());
  LLM_CHECK(peer != rank(),
            "{}: peer {} is this member; point-to-point needs another member of the group", op,
            peer);
}

CommHandle& CommHandle::operator=(CommHandle&& other) noexcept {
  if (this != &other) {
    wait();  // the collective this handle tracked must finish before we forget it
    wait_ = std::move(other.wait_);
    other.wait_ = nullptr;
  }
  return *this;
}

void CommHandle::wait() {
  // Cleared before running so that it runs once even if it throws.
  std::function<void()> wait = std::move(wait_);
  wait_ = nullptr;
  if (wait) wait();
}

}  // namespace llm
