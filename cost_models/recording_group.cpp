// The data-free group of the recordings (see recording_group.h).
#include "cost_models/recording_group.h"

#include <cstring>

#include "base/error.h"

namespace llm {

RecordingGroup::RecordingGroup(int size, OnCollective on_collective, OnScalarSum on_scalar_sum)
    : size_(size),
      on_collective_(std::move(on_collective)),
      on_scalar_sum_(std::move(on_scalar_sum)) {}

CommHandle RecordingGroup::all_reduce_async(void*, size_t count, WireType type) {
  count_all_reduce(count, type);
  return on_collective_(CollectiveOp::all_reduce, count, type);
}

CommHandle RecordingGroup::reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                                WireType type) {
  count_reduce_scatter(recv_count, type);
  std::memmove(recv, send, recv_count * wire_bytes(type));
  return on_collective_(CollectiveOp::reduce_scatter, recv_count, type);
}

CommHandle RecordingGroup::all_gather_async(const void* send, void* recv, size_t send_count,
                                            WireType type) {
  count_all_gather(send_count, type);
  const size_t chunk = send_count * wire_bytes(type);
  if (send != recv) std::memmove(recv, send, chunk);
  std::memset(static_cast<char*>(recv) + chunk, 0, chunk * (size_ - 1));
  return on_collective_(CollectiveOp::all_gather, send_count, type);
}

CommHandle RecordingGroup::broadcast_async(void*, size_t, WireType, int) {
  LLM_FAIL("recording: the step issued a broadcast, which the recording does not know");
}

namespace {
[[noreturn]] void point_to_point() {
  LLM_FAIL(
      "recording: the step issued a point-to-point message, which the recording does not know");
}
}  // namespace

CommHandle RecordingGroup::send_async(const void*, size_t, WireType, int) { point_to_point(); }
CommHandle RecordingGroup::recv_async(void*, size_t, WireType, int) { point_to_point(); }
CommHandle RecordingGroup::send_recv_async(const void*, size_t, int, void*, size_t, int, WireType) {
  point_to_point();
}

std::unique_ptr<Group> RecordingGroup::split(int, int) {
  return std::make_unique<RecordingGroup>(1, on_collective_, on_scalar_sum_);
}

double RecordingGroup::all_reduce_sum(double value) {
  on_scalar_sum_();
  return value;
}

}  // namespace llm
