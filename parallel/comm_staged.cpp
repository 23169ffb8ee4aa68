// The staged Group (see comm_staged.h).
#include "parallel/comm_staged.h"

#include <string>
#include <utility>
#include <vector>

namespace llm {
namespace {

// Host buffers handed out per collective and returned when it is waited on.
class StagingPool {
 public:
  std::vector<char> take(size_t bytes) {
    std::vector<char> buffer;
    if (!free_.empty()) {
      buffer = std::move(free_.back());
      free_.pop_back();
    }
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer;
  }
  void give_back(std::vector<char> buffer) { free_.push_back(std::move(buffer)); }

 private:
  std::vector<std::vector<char>> free_;
};

class StagedGroup : public Group {
 public:
  StagedGroup(Group& host, std::unique_ptr<Group> owned, const DeviceMemory& memory)
      : host_(host),
        owned_(std::move(owned)),
        memory_(memory),
        pool_(std::make_shared<StagingPool>()) {
    // Its operations are the host group's, recorded and watched there: its
    // own trace would be an empty twin under the same label.
    watchdog_unregister(&trace_);
  }

  void set_label(std::string label) override { host_.set_label(std::move(label)); }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }

  CommHandle all_reduce_async(void* data, size_t count, WireType type) override {
    count_all_reduce(count, type);
    const size_t bytes = count * wire_bytes(type);
    auto staged = stage(data, bytes, bytes);
    CommHandle inner = host_.all_reduce_async(staged->data(), count, type);
    return finish(std::move(inner), std::move(staged), data, bytes);
  }

  CommHandle reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                  WireType type) override {
    count_reduce_scatter(recv_count, type);
    const size_t chunk = recv_count * wire_bytes(type), whole = chunk * size();
    // One buffer: [send (whole) | recv (chunk)].
    auto staged = stage(send, whole, whole + chunk);
    CommHandle inner =
        host_.reduce_scatter_async(staged->data(), staged->data() + whole, recv_count, type);
    return finish(std::move(inner), std::move(staged), recv, chunk, whole);
  }

  CommHandle all_gather_async(const void* send, void* recv, size_t send_count,
                              WireType type) override {
    count_all_gather(send_count, type);
    const size_t chunk = send_count * wire_bytes(type), whole = chunk * size();
    // One buffer: [recv (whole) | send (chunk)]; send may be recv's own slot on the device.
    auto staged = std::make_shared<std::vector<char>>(pool_->take(whole + chunk));
    memory_.to_host(staged->data() + whole, send, chunk);
    CommHandle inner =
        host_.all_gather_async(staged->data() + whole, staged->data(), send_count, type);
    return finish(std::move(inner), std::move(staged), recv, whole);
  }

  CommHandle broadcast_async(void* data, size_t count, WireType type, int root) override {
    count_broadcast(count, type);
    const size_t bytes = count * wire_bytes(type);
    auto staged = stage(data, bytes, bytes);
    CommHandle inner = host_.broadcast_async(staged->data(), count, type, root);
    return finish(std::move(inner), std::move(staged), data, bytes);
  }

  // A send stages its input and needs nothing back; a receive stages nothing
  // and copies its result to the device when waited on.
  CommHandle send_async(const void* data, size_t count, WireType type, int peer) override {
    check_peer("send", peer);
    count_send(count, type);
    const size_t bytes = count * wire_bytes(type);
    auto staged = stage(data, bytes, bytes);
    CommHandle inner = host_.send_async(staged->data(), count, type, peer);
    return finish(std::move(inner), std::move(staged), nullptr, 0);
  }

  CommHandle recv_async(void* data, size_t count, WireType type, int peer) override {
    check_peer("recv", peer);
    const size_t bytes = count * wire_bytes(type);
    auto staged = stage(nullptr, 0, bytes);
    CommHandle inner = host_.recv_async(staged->data(), count, type, peer);
    return finish(std::move(inner), std::move(staged), data, bytes);
  }

  CommHandle send_recv_async(const void* send, size_t send_count, int send_peer, void* recv,
                             size_t recv_count, int recv_peer, WireType type) override {
    if (send_count > 0) check_peer("send_recv (send)", send_peer);
    if (recv_count > 0) check_peer("send_recv (recv)", recv_peer);
    count_send(send_count, type);
    const size_t send_bytes = send_count * wire_bytes(type),
                 recv_bytes = recv_count * wire_bytes(type);
    // One buffer: [send | recv].
    auto staged = stage(send, send_bytes, send_bytes + recv_bytes);
    CommHandle inner =
        host_.send_recv_async(staged->data(), send_count, send_peer, staged->data() + send_bytes,
                              recv_count, recv_peer, type);
    return finish(std::move(inner), std::move(staged), recv, recv_bytes, send_bytes);
  }

  void barrier() override {
    memory_.synchronize();
    host_.barrier();
  }

  std::unique_ptr<Group> split(int color, int key) override {
    std::unique_ptr<Group> child = host_.split(color, key);
    Group& child_ref = *child;
    return std::make_unique<StagedGroup>(child_ref, std::move(child), memory_);
  }

  double all_reduce_sum(double value) override { return host_.all_reduce_sum(value); }

 private:
  using Staged = std::shared_ptr<std::vector<char>>;

  // A staging buffer of `capacity` bytes whose first `bytes` hold src.
  Staged stage(const void* src, size_t bytes, size_t capacity) {
    auto staged = std::make_shared<std::vector<char>>(pool_->take(capacity));
    memory_.to_host(staged->data(), src, bytes);
    return staged;
  }

  // A handle that waits for the host collective, copies `bytes` from the
  // staging buffer (at `offset`) to dst and returns the buffer to the pool.
  CommHandle finish(CommHandle inner, Staged staged, void* dst, size_t bytes, size_t offset = 0) {
    auto pending = std::make_shared<CommHandle>(std::move(inner));
    std::shared_ptr<StagingPool> pool = pool_;
    const DeviceMemory* memory = &memory_;
    return CommHandle([pending, staged, pool, memory, dst, bytes, offset] {
      pending->wait();
      memory->to_device(dst, staged->data() + offset, bytes);
      pool->give_back(std::move(*staged));
    });
  }

  Group& host_;
  std::unique_ptr<Group> owned_;  // the host group of a split, else null
  const DeviceMemory& memory_;
  std::shared_ptr<StagingPool> pool_;
};

}  // namespace

std::unique_ptr<Group> make_staged_group(Group& host, const DeviceMemory& memory) {
  return std::make_unique<StagedGroup>(host, nullptr, memory);
}

}  // namespace llm
