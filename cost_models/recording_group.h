// A group that runs the real model and engine without other ranks, for
// recording what they issue (the step trace, the tensor-parallel traffic):
// seen from rank 0 of `size`, it moves no data between ranks and only keeps
// buffers finite (a reduce-scatter keeps rank 0's own chunk, an all-gather
// copies it and zeroes the rest), and it hands every collective to a
// callback, whose handle is what the caller waits on. Its CommStats count like
// a real group's. Broadcasts and point-to-point messages throw: a recording
// that meets one is out of date (a subclass overrides what it expects).
#pragma once

#include <functional>
#include <memory>

#include "collectives/group.h"
#include "cost_models/step_trace.h"

namespace llm {

class RecordingGroup : public Group {
 public:
  // A collective's operation, element count (one member's chunk for the
  // gather and the scatter) and wire type; returns the handle to wait on.
  using OnCollective = std::function<CommHandle(CollectiveOp op, size_t count, WireType type)>;
  // A scalar sum (all_reduce_sum), which returns its own value.
  using OnScalarSum = std::function<void()>;

  RecordingGroup(int size, OnCollective on_collective, OnScalarSum on_scalar_sum);
  int rank() const override { return 0; }
  int size() const override { return size_; }

  CommHandle all_reduce_async(void* data, size_t count, WireType type) override;
  CommHandle reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                  WireType type) override;
  CommHandle all_gather_async(const void* send, void* recv, size_t send_count,
                              WireType type) override;
  CommHandle broadcast_async(void* data, size_t count, WireType type, int root) override;
  CommHandle send_async(const void* data, size_t count, WireType type, int peer) override;
  CommHandle recv_async(void* data, size_t count, WireType type, int peer) override;
  CommHandle send_recv_async(const void* send, size_t send_count, int send_peer, void* recv,
                             size_t recv_count, int recv_peer, WireType type) override;
  void barrier() override {}
  // A group of one with the same callbacks (the caller replaces it where a
  // real split would matter).
  std::unique_ptr<Group> split(int color, int key) override;
  double all_reduce_sum(double value) override;

 private:
  int size_;
  OnCollective on_collective_;
  OnScalarSum on_scalar_sum_;
};

}  // namespace llm
