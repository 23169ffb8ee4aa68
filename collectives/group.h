// Communication over process groups, as an interface: parallel/ implements it
// (MPI, NCCL, host-staged) and owns the MPI world (parallel/comm.h); the model
// uses it for tensor parallelism's collectives. A Group is a set of ranks
// offering the
// collectives the sharding engine needs and the point-to-point messages of
// pipeline stages, each asynchronous (returns a CommHandle to wait on) with a
// blocking convenience form.
// Invariants: collectives on a group are issued in the same order by every
// member; point-to-point messages between one (sender, receiver) pair are
// matched in the order they were issued; a single-rank group needs no special
// casing for collectives (every one is a copy or a no-op), while a
// point-to-point peer must be another member; every collective and every send
// adds its traffic to the group's CommStats (a receive adds nothing); every
// group numbers its operations in its GroupTrace and is watched
// (collectives/watchdog.h): an MPI group waits on each under the watchdog, an
// NCCL group has each tracked until its device has run it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "collectives/watchdog.h"
#include "collectives/wire_type.h"

namespace llm {

// Traffic of one group, counted per collective. `payload` is the bytes of the
// full logical buffer (e.g. the whole input of a reduce-scatter); `sent` is
// what a ring algorithm sends per rank: all_reduce 2(n-1)/n, reduce_scatter
// and all_gather (n-1)/n of the payload, broadcast the payload (root).
// Point-to-point counts on the sender only: each send_async and
// send_recv_async is one call whose payload and sent are the bytes this member
// sends; a receive counts nothing, so summing members' stats counts every
// message once.
struct CommStats {
  uint64_t calls = 0;
  uint64_t payload_bytes = 0;
  uint64_t sent_bytes = 0;
  uint64_t all_reduce_sent = 0, reduce_scatter_sent = 0, all_gather_sent = 0, broadcast_sent = 0;
  uint64_t p2p_sent = 0;  // send_async and the send half of send_recv_async
  void add(const CommStats& other);
};

// One collective's traffic as CommStats counts it, for a group of n: the
// logical payload and the bytes a ring sends per member. The single source of
// these formulas (the comm layers count with them, the throughput model
// predicts with them). `bytes` is the whole buffer for all-reduce and
// broadcast, one member's chunk for reduce-scatter and all-gather.
struct Traffic {
  uint64_t payload = 0, sent = 0;
};
Traffic all_reduce_traffic(uint64_t bytes, int n);
Traffic chunked_traffic(uint64_t chunk_bytes, int n);  // reduce-scatter, all-gather
Traffic broadcast_traffic(uint64_t bytes, int n);
Traffic p2p_traffic(uint64_t bytes);  // one send of `bytes`

// A pending collective; wait() blocks until its buffers may be used. Waiting
// twice is harmless; destroying an unwaited handle waits.
class CommHandle {
 public:
  CommHandle() = default;
  explicit CommHandle(std::function<void()> wait) : wait_(std::move(wait)) {}
  CommHandle(CommHandle&& other) noexcept : wait_(std::move(other.wait_)) { other.wait_ = nullptr; }
  CommHandle& operator=(CommHandle&& other) noexcept;
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  ~CommHandle() { wait(); }
  void wait();
  bool pending() const { return static_cast<bool>(wait_); }

 private:
  std::function<void()> wait_;
};

class Group {
 public:
  Group() { watchdog_register(&trace_); }
  virtual ~Group() { watchdog_unregister(&trace_); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // The watchdog's view: label, members' world ranks, operations numbered.
  // Implementations fill the members; the label is the parent's plus the
  // split's index ("world.2") until set_label names it ("tensor"). A group
  // built over a host group of the same members (NCCL's) labels that one too.
  const GroupTrace& trace() const { return trace_; }
  virtual void set_label(std::string label) { trace_.label = std::move(label); }

  // In place: data (count) becomes the elementwise sum over the group.
  virtual CommHandle all_reduce_async(void* data, size_t count, WireType type) = 0;
  // send holds size() chunks of recv_count; member r receives the elementwise
  // sum of every member's chunk r.
  virtual CommHandle reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                          WireType type) = 0;
  // recv (size() * send_count) is every member's send, in rank order.
  virtual CommHandle all_gather_async(const void* send, void* recv, size_t send_count,
                                      WireType type) = 0;
  // data (count) of member `root` is copied to every member.
  virtual CommHandle broadcast_async(void* data, size_t count, WireType type, int root) = 0;
  virtual void barrier() = 0;

  // Point-to-point, for pipeline stages: sends `count` elements of `type` from
  // this member to member `peer` / receives them from `peer`. Messages between
  // one (sender, receiver) pair are matched in the order they were issued. The
  // peer must be another member (a single-member group has none); a count of
  // 0 is no message, on both sides. On NCCL a send may wait for its receiver
  // to start receiving, and one member's messages run one at a time, so two
  // members that each send to the other before receiving can deadlock:
  // exchanges go through send_recv_async.
  virtual CommHandle send_async(const void* data, size_t count, WireType type, int peer) = 0;
  virtual CommHandle recv_async(void* data, size_t count, WireType type, int peer) = 0;
  // Both at once (a send to send_peer and a receive from recv_peer issued as
  // one group, so two stages exchanging in opposite directions cannot deadlock
  // on NCCL); either count may be 0 for none (its peer is then not used). The
  // buffers must not overlap.
  virtual CommHandle send_recv_async(const void* send, size_t send_count, int send_peer, void* recv,
                                     size_t recv_count, int recv_peer, WireType type) = 0;

  // A new group of the members that pass the same color, ordered by key.
  virtual std::unique_ptr<Group> split(int color, int key) = 0;

  void all_reduce(void* data, size_t count, WireType type) {
    all_reduce_async(data, count, type).wait();
  }
  void reduce_scatter(const void* send, void* recv, size_t recv_count, WireType type) {
    reduce_scatter_async(send, recv, recv_count, type).wait();
  }
  void all_gather(const void* send, void* recv, size_t send_count, WireType type) {
    all_gather_async(send, recv, send_count, type).wait();
  }
  void broadcast(void* data, size_t count, WireType type, int root) {
    broadcast_async(data, count, type, root).wait();
  }
  void send(const void* data, size_t count, WireType type, int peer) {
    send_async(data, count, type, peer).wait();
  }
  void recv(void* data, size_t count, WireType type, int peer) {
    recv_async(data, count, type, peer).wait();
  }
  // Sum of a double over the group (gradient norms, losses); blocking.
  virtual double all_reduce_sum(double value) = 0;

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  // What the caller says its next collective carries: an opaque tag (the
  // transformer's TensorPayload, model/tensor_payload.h), kept until the next
  // set_tag. Groups that move data ignore it; a recording group sizes the
  // real model's collective by it (cost_models/tensor_parallel_model.cpp).
  void set_tag(int tag) { tag_ = tag; }
  int tag() const { return tag_; }

 protected:
  // The ring-algorithm traffic of one collective, added to stats_ by every
  // implementation the same way (see CommStats).
  void count_all_reduce(size_t count, WireType type);
  void count_reduce_scatter(size_t recv_count, WireType type);
  void count_all_gather(size_t send_count, WireType type);
  void count_broadcast(size_t count, WireType type);
  void count_send(size_t count, WireType type);
  // Records an operation of `count` elements about to be issued, for the
  // watchdog (collectives/watchdog.h); `peer` marks a message.
  const OpRecord& issue(const char* op, size_t count, WireType type, int peer = -1) {
    return watchdog_issue(trace_, op, count * wire_bytes(type), to_string(type), peer);
  }
  // Throws unless `peer` is another member of this group; `op` names the call
  // in the message ("send: peer 5 is outside the group of 4").
  void check_peer(const char* op, int peer) const;

  CommStats stats_;
  GroupTrace trace_;

 private:
  int tag_ = 0;
  void count(Traffic traffic, uint64_t& collective_sent);
};

}  // namespace llm
