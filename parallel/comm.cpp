// The backend-independent parts of comm.h: element sizes, stats accumulation
// and the run-once semantics of CommHandle.
// Invariant: a CommHandle's wait function runs at most once.
#include "parallel/comm.h"

namespace llm {

size_t wire_bytes(WireType type) {
  switch (type) {
    case WireType::f32: return 4;
    case WireType::bf16: return 2;
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
