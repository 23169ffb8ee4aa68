// Group over three NCCL communicators of the same members (device buffers),
// built over an MPI group that carries the NCCL id exchange, the barrier and
// all_reduce_sum. Gathers and broadcasts go through one communicator on the
// gather stream, reductions through another on the reduce stream, and
// point-to-point messages through the third on the p2p stream: NCCL orders
// the operations of one communicator one after another, so with a single one
// a backward's parameter prefetch would wait for the gradient reduction issued
// before it, and a pipeline stage's activations for an all-gather unrelated to
// them; with one communicator each they run side by side.
// Invariants: every collective and message is queued on its stream after an
// event that makes it wait for the compute stream, and its handle makes the
// compute stream wait for an event recorded after it (the host never blocks,
// except in barrier and all_reduce_sum); each collective communicator sees its
// collectives in the same order on every member (the group's call order), the
// p2p communicator the messages of each pair in the same order on both sides;
// events come from a per-group pool that grows to the number of operations
// in flight at once and is then reused, so steady-state calls create no
// events; every collective adds the MPI group's ring-algorithm traffic to
// stats_, every send its bytes; every operation is recorded and tracked by
// the watchdog (collectives/watchdog.h) until its end event has passed, and an
// expiry aborts the communicators (ncclCommAbort) before the job goes down.
// A group of one member makes no communicator (one holds device memory, and
// a mesh has many groups of one: with several ranks on one GPU they filled
// it): its collectives are queued the same way, as a copy where the result
// lands elsewhere and as nothing otherwise.
#include <nccl.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "device/cuda_runtime.cuh"
#include "base/fault_hooks.h"
#include "collectives/watchdog.h"
#include "parallel/comm.h"
#include "parallel/comm_nccl.h"

namespace llm {
namespace {

// Names the NCCL call (its function name), the operation it serves (when
// known: "all_reduce #115 on group 'world'"), NCCL's error string and, when
// NCCL left one, its detailed last-error message (which says what was
// actually wrong). A bad argument or use is ours; any other error (the
// system, a remote peer, the network) is the machine's, and a restart can
// succeed. main() adds the rank.
[[noreturn]] void throw_nccl_error(const char* call, ncclResult_t status, const OpRecord* op,
                                   const char* detail, const char* file, int line) {
  std::string what(call);
  what = what.substr(0, what.find('('));
  if (op)
    what += std::string(" (") + op->op + " #" + std::to_string(op->seq) + " on group '" +
            op->group + "')";
  std::string error = ncclGetErrorString(status);
  if (!detail) detail = ncclGetLastError(nullptr);
  if (detail && *detail) error += std::string(" (") + detail + ")";
  const bool ours = status == ncclInvalidArgument || status == ncclInvalidUsage;
  cuda::throw_nccl_failure(what.c_str(), error.c_str(), /*restartable=*/!ours, file, line);
}

// The test hook of docs/testing.md: LLM_FAULT_NCCL_ERROR=R:N has world rank
// R's N-th call on a communicator (a collective or a message of a group of
// more than one member) fail as NCCL fails when its transport does: the call
// returns ncclSystemError, and the peers are left waiting for this rank.
bool nccl_error_injected() {
  static const RankFault fault = rank_fault_from_env("LLM_FAULT_NCCL_ERROR");
  static int64_t calls = 0;
  return fault.rank >= 0 && comm_world().rank() == fault.rank && ++calls == fault.value;
}

// A call on a communicator for the operation `op`: polled while NCCL reports
// it in progress; not made, and failed as the test hook says, when
// LLM_FAULT_NCCL_ERROR aims at it.
#define LLM_NCCL_SETTLE(comm, op, call)                                                            \
  do {                                                                                             \
    const bool llm_nccl_injected_ = ::llm::nccl_error_injected();                                  \
    settle((comm), llm_nccl_injected_ ? ncclSystemError : (call), #call, &(op),                    \
           llm_nccl_injected_ ? "injected by LLM_FAULT_NCCL_ERROR" : nullptr, __FILE__, __LINE__); \
  } while (0)

#define LLM_NCCL_CHECK(call)                                                                  \
  do {                                                                                        \
    ncclResult_t llm_nccl_status_ = (call);                                                   \
    if (llm_nccl_status_ != ncclSuccess)                                                      \
      ::llm::throw_nccl_error(#call, llm_nccl_status_, nullptr, nullptr, __FILE__, __LINE__); \
  } while (0)

// A bad argument to a collective. CUDA sources cannot format (no fmt), so it
// goes through the CUDA thrower, which still raises llm::Error with file:line.
[[noreturn]] void throw_argument_error(const char* collective, const char* why, const char* file,
                                       int line) {
  cuda::throw_cuda_error(collective, why, file, line);
}

ncclDataType_t nccl_type(WireType type) {
  return type == WireType::f32 ? ncclFloat32 : ncclBfloat16;
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

// Events without timing, recycled. cudaStreamWaitEvent captures the event's
// latest record when it is called, so an event is free again as soon as the
// stream that needed it has been told to wait on it.
class EventPool {
 public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool() {
    for (cudaEvent_t event : all_) cudaEventDestroy(event);  // at exit the context may be gone
  }

  cudaEvent_t acquire() {
    if (free_.empty()) {
      all_.reserve(all_.size() + 1);  // so that the push below cannot leak a created event
      cudaEvent_t event = nullptr;
      LLM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      all_.push_back(event);
      free_.reserve(all_.size());  // releases never allocate
      return event;
    }
    cudaEvent_t event = free_.back();
    free_.pop_back();
    return event;
  }
  void release(cudaEvent_t event) { free_.push_back(event); }

 private:
  std::vector<cudaEvent_t> all_;   // every event created, destroyed with the pool
  std::vector<cudaEvent_t> free_;  // those no stream still has to be told to wait on
};

class NcclGroup : public Group {
 public:
  // Collective over `host`'s members; `host` must be a host-buffer (MPI) group.
  explicit NcclGroup(std::unique_ptr<Group> host)
      : host_(std::move(host)), events_(std::make_shared<EventPool>()) {
    rank_ = host_->rank();
    size_ = host_->size();
    // The streams bind to the current device on first use: make that the
    // device NCCL is about to bind to as well.
    cuda::compute_stream();
    ncclUniqueId ids[3]{};  // gather, reduce, p2p
    if (rank_ == 0 && size_ > 1)
      for (ncclUniqueId& id : ids) LLM_NCCL_CHECK(ncclGetUniqueId(&id));
    // The ids are opaque bytes; they travel as f32 elements, which the MPI
    // group copies bit for bit (a broadcast never does arithmetic).
    static_assert(sizeof(ids) % sizeof(float) == 0, "NCCL ids are not a whole number of f32");
    host_->broadcast(ids, sizeof(ids) / (sizeof(float)), WireType::f32, /*root=*/0);
    // The watchdog names this group as its host group was named; the host
    // group (barrier, all_reduce_sum) becomes "<label>/host".
    trace_.world_ranks = host_->trace().world_ranks;
    trace_.transport = "nccl";
    set_label(host_->trace().label);
    if (size_ > 1) {
      gather_comm_ = make_communicator(ids[0]);
      reduce_comm_ = make_communicator(ids[1]);
      p2p_comm_ = make_communicator(ids[2]);
    }
    // A stalled collective must not keep the GPU: the watchdog aborts the
    // communicators (the kernels waiting on a lost peer end) before MPI_Abort.
    watchdog_add_abort_hook(this, [this] { abort_communicators(); });
  }

  ~NcclGroup() override {
    watchdog_remove_abort_hooks(this);
    const bool unwinding = std::uncaught_exceptions() > 0;
    for (auto [comm, stream] : {std::pair{gather_comm_, cuda::gather_stream()},
                                std::pair{reduce_comm_, cuda::reduce_stream()},
                                std::pair{p2p_comm_, cuda::p2p_stream()}}) {
      if (!comm) continue;
      if (unwinding) {
        // Unwinding after a failure: the peers may never reach a clean
        // shutdown, so free locally without waiting for them (main then
        // takes the job down).
        ncclCommAbort(comm);
        continue;
      }
      cudaStreamSynchronize(stream);  // errors at exit have no one to report to
      ncclCommDestroy(comm);
    }
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void set_label(std::string label) override {
    host_->set_label(label + "/host");
    trace_.label = std::move(label);
  }

  CommHandle all_reduce_async(void* data, size_t count, WireType type) override {
    if (size_ > 1 && count > 0 && shorts_this_all_reduce()) count -= 1;
    count_all_reduce(count, type);
    if (count == 0) return {};
    return enqueue(cuda::reduce_stream(), issue("all_reduce", count, type),
                   [&](cudaStream_t stream, const OpRecord& issued) {
                     if (size_ == 1) return;
                     LLM_NCCL_SETTLE(reduce_comm_, issued,
                                     ncclAllReduce(data, data, count, nccl_type(type), ncclSum,
                                                   reduce_comm_, stream));
                   });
  }

  CommHandle reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                  WireType type) override {
    uint64_t chunk = recv_count * wire_bytes(type);
    if (overlaps(send, size_ * chunk, recv, chunk))
      throw_argument_error("reduce_scatter", "send and recv buffers overlap", __FILE__, __LINE__);
    count_reduce_scatter(recv_count, type);
    if (recv_count == 0) return {};
    return enqueue(cuda::reduce_stream(), issue("reduce_scatter", size_ * recv_count, type),
                   [&](cudaStream_t stream, const OpRecord& issued) {
                     if (size_ == 1) return copy_alone(recv, send, chunk, stream);
                     LLM_NCCL_SETTLE(reduce_comm_, issued,
                                     ncclReduceScatter(send, recv, recv_count, nccl_type(type),
                                                       ncclSum, reduce_comm_, stream));
                   });
  }

  // send may be this member's own slot of recv (the shard living inside the
  // full buffer): that is NCCL's in-place all-gather, as it is MPI's.
  CommHandle all_gather_async(const void* send, void* recv, size_t send_count,
                              WireType type) override {
    uint64_t chunk = send_count * wire_bytes(type);
    const void* own_slot = static_cast<const char*>(recv) + rank_ * chunk;
    bool in_place = send == own_slot;
    if (!in_place && overlaps(send, chunk, recv, size_ * chunk))
      throw_argument_error("all_gather",
                           "send overlaps recv without being this member's slot of it", __FILE__,
                           __LINE__);
    count_all_gather(send_count, type);
    if (send_count == 0) return {};
    return enqueue(cuda::gather_stream(), issue("all_gather", size_ * send_count, type),
                   [&](cudaStream_t stream, const OpRecord& issued) {
                     if (size_ == 1) return copy_alone(recv, send, chunk, stream);
                     LLM_NCCL_SETTLE(gather_comm_, issued,
                                     ncclAllGather(send, recv, send_count, nccl_type(type),
                                                   gather_comm_, stream));
                   });
  }

  CommHandle broadcast_async(void* data, size_t count, WireType type, int root) override {
    if (root < 0 || root >= size_)
      throw_argument_error("broadcast", "root outside the group", __FILE__, __LINE__);
    count_broadcast(count, type);
    if (count == 0) return {};
    return enqueue(cuda::gather_stream(), issue("broadcast", count, type),
                   [&](cudaStream_t stream, const OpRecord& issued) {
                     if (size_ == 1) return;
                     LLM_NCCL_SETTLE(gather_comm_, issued,
                                     ncclBroadcast(data, data, count, nccl_type(type), root,
                                                   gather_comm_, stream));
                   });
  }

  // Point-to-point messages run on their own communicator and stream, not on
  // the gather or reduce ones: a pipeline stage's send is on the critical path
  // of the next stage, and NCCL would run it only after every all-gather (or
  // reduction) queued on the same communicator before it, such as a
  // parameter prefetch for a later unit. The price is one more communicator
  // per group, made at construction because making one is collective over
  // every member while a message involves two.
  CommHandle send_async(const void* data, size_t count, WireType type, int peer) override {
    check_peer("send", peer);
    count_send(count, type);
    if (count == 0) return {};
    return enqueue(cuda::p2p_stream(), issue("send", count, type, peer),
                   [&](cudaStream_t stream, const OpRecord& issued) {
                     LLM_NCCL_SETTLE(
                         p2p_comm_, issued,
                         ncclSend(data, count, nccl_type(type), peer, p2p_comm_, stream));
                   });
  }

  CommHandle recv_async(void* data, size_t count, WireType type, int peer) override {
    check_peer("recv", peer);
    if (count == 0) return {};
    return enqueue(cuda::p2p_stream(), issue("recv", count, type, peer),
                   [&](cudaStream_t stream, const OpRecord& issued) {
                     LLM_NCCL_SETTLE(
                         p2p_comm_, issued,
                         ncclRecv(data, count, nccl_type(type), peer, p2p_comm_, stream));
                   });
  }

  // One NCCL group, so the send and the receive progress together: issued
  // apart, each member's send could wait for a receive queued behind the
  // other member's send.
  CommHandle send_recv_async(const void* send, size_t send_count, int send_peer, void* recv,
                             size_t recv_count, int recv_peer, WireType type) override {
    if (send_count > 0) check_peer("send_recv (send)", send_peer);
    if (recv_count > 0) check_peer("send_recv (recv)", recv_peer);
    if (overlaps(send, send_count * wire_bytes(type), recv, recv_count * wire_bytes(type)))
      throw_argument_error("send_recv", "send and recv buffers overlap", __FILE__, __LINE__);
    count_send(send_count, type);
    if (send_count == 0 && recv_count == 0) return {};
    const OpRecord& op =
        issue("send_recv", send_count + recv_count, type, send_count > 0 ? send_peer : recv_peer);
    return enqueue(cuda::p2p_stream(), op, [&](cudaStream_t stream, const OpRecord& issued) {
      LLM_NCCL_CHECK(ncclGroupStart());
      ncclResult_t queued = ncclSuccess;
      if (send_count > 0)
        queued = ncclSend(send, send_count, nccl_type(type), send_peer, p2p_comm_, stream);
      if (queued == ncclSuccess && recv_count > 0)
        queued = ncclRecv(recv, recv_count, nccl_type(type), recv_peer, p2p_comm_, stream);
      // Ended even after a failure, so that NCCL is not left inside the group.
      ncclResult_t ended = ncclGroupEnd();
      if (queued != ncclSuccess)
        throw_nccl_error("ncclSend / ncclRecv", queued, &issued, nullptr, __FILE__, __LINE__);
      settle(p2p_comm_, ended, "ncclGroupEnd", &issued, nullptr, __FILE__, __LINE__);
    });
  }

  // Everything this process queued is done, then every member has got here.
  // The waits are the watchdog's: a collective stalled on a lost peer expires.
  void barrier() override {
    for (cudaStream_t stream :
         {cuda::gather_stream(), cuda::reduce_stream(), cuda::p2p_stream(), cuda::compute_stream()})
      cuda::wait_for_stream(stream);
    host_->barrier();
  }

  // The host group is split the same way and the child gets a fresh NCCL
  // communicator over it (rather than ncclCommSplit): one construction path
  // for every NcclGroup, and the child needs its own host group anyway.
  // Splits happen once at start-up, so the extra id exchange costs nothing.
  std::unique_ptr<Group> split(int color, int key) override {
    return std::make_unique<NcclGroup>(host_->split(color, key));
  }

  // A host value (a norm or a loss already read back): summed on the host
  // group, with no device round trip and no stream synchronization.
  double all_reduce_sum(double value) override { return host_->all_reduce_sum(value); }

 private:
  // A communicator in NCCL's non-blocking mode, whose creation (collective
  // over the members) is polled under the watchdog: a member that never
  // arrives expires, named, instead of hanging the others at start-up.
  ncclComm_t make_communicator(const ncclUniqueId& id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t status = ncclCommInitRankConfig(&comm, size_, id, rank_, &config);
    if (status == ncclInProgress) {
      const OpRecord& op = watchdog_issue(trace_, "nccl_init", 0, "-");
      watchdog_wait(trace_, op, [&] {
        ncclCommGetAsyncError(comm, &status);
        return status != ncclInProgress;
      });
    }
    if (status != ncclSuccess) {
      if (comm) ncclCommAbort(comm);
      throw_nccl_error("ncclCommInitRankConfig", status, nullptr, nullptr, __FILE__, __LINE__);
    }
    return comm;
  }

  // A call on a non-blocking communicator may return ncclInProgress (NCCL
  // connecting to a peer, say): it is polled to its end under the watchdog
  // before anything else is called on `comm`.
  static void settle(ncclComm_t comm, ncclResult_t status, const char* call, const OpRecord* op,
                     const char* detail, const char* file, int line) {
    if (status == ncclInProgress) {
      watchdog_wait_device("an NCCL call", [&] {
        ncclCommGetAsyncError(comm, &status);
        return status != ncclInProgress;
      });
    }
    if (status != ncclSuccess) throw_nccl_error(call, status, op, detail, file, line);
  }

  // The test hook of docs/testing.md: LLM_FAULT_SHORT_ALL_REDUCE=R:N has
  // world rank R's N-th all-reduce over NCCL called with one element fewer
  // than its peers pass, a size mismatch NCCL itself does not check.
  static bool shorts_this_all_reduce() {
    static const RankFault fault = rank_fault_from_env("LLM_FAULT_SHORT_ALL_REDUCE");
    static int64_t calls = 0;
    return fault.rank >= 0 && comm_world().rank() == fault.rank && ++calls == fault.value;
  }

  // Ends every communicator now, without waiting for the peers (NCCL's
  // kernels stuck on a lost peer end); the group is unusable afterwards.
  void abort_communicators() {
    for (ncclComm_t* comm : {&gather_comm_, &reduce_comm_, &p2p_comm_}) {
      if (*comm) ncclCommAbort(*comm);
      *comm = nullptr;
    }
  }

  // A group of one's reduce-scatter or all-gather: its one block, unless in place.
  static void copy_alone(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
    if (dst != src)
      LLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  }

  // Queues `nccl_call` on `comm` (the gather, reduce or p2p stream) behind
  // everything queued on the compute stream so far; the handle puts the
  // compute stream behind it, and the watchdog tracks `op` until the stream
  // has run it.
  template <class NcclCall>
  CommHandle enqueue(cudaStream_t comm, const OpRecord& op, NcclCall&& nccl_call) {
    cudaStream_t compute = cuda::compute_stream();
    cudaEvent_t inputs_ready = events_->acquire();
    cudaError_t status = cudaEventRecord(inputs_ready, compute);
    if (status == cudaSuccess) status = cudaStreamWaitEvent(comm, inputs_ready, 0);
    events_->release(inputs_ready);  // the wait has captured the record
    LLM_CUDA_CHECK(status);

    nccl_call(comm, op);

    cudaEvent_t end = events_->acquire();
    status = cudaEventRecord(end, comm);
    if (status != cudaSuccess) {
      events_->release(end);
      LLM_CUDA_CHECK(status);
    }
    // Two hold the end event: the handle, until the compute stream is told to
    // wait on it, and the watchdog, until it has passed; the last returns it
    // to the pool (shared, so that either may outlive the group).
    std::shared_ptr<std::remove_pointer_t<cudaEvent_t>> done(
        end, [events = events_](cudaEvent_t event) { events->release(event); });
    watchdog_track(trace_, op, [done] { return cudaEventQuery(done.get()) != cudaErrorNotReady; });
    return CommHandle([done] {
      cudaError_t wait_status = cudaStreamWaitEvent(cuda::compute_stream(), done.get(), 0);
      // A handle destroyed while unwinding must not throw a second exception.
      if (wait_status != cudaSuccess && std::uncaught_exceptions() == 0)
        LLM_CUDA_CHECK(wait_status);
    });
  }

  std::unique_ptr<Group> host_;  // same members, host buffers (MPI)
  std::shared_ptr<EventPool> events_;
  ncclComm_t gather_comm_ = nullptr;  // all-gather, broadcast; on the gather stream
  ncclComm_t reduce_comm_ = nullptr;  // reduce-scatter, all-reduce; on the reduce stream
  ncclComm_t p2p_comm_ = nullptr;     // send, recv; on the p2p stream
  int rank_ = 0, size_ = 1;
};

bool is_nccl_group(Group& group) { return dynamic_cast<NcclGroup*>(&group) != nullptr; }

}  // namespace

std::unique_ptr<Group> make_nccl_group(Group& members) {
  // The id exchange needs host buffers: an NCCL group would read it as a
  // device pointer.
  if (is_nccl_group(members))
    throw_argument_error("make_nccl_group",
                         "members must be an MPI (host-buffer) group, not an NCCL group", __FILE__,
                         __LINE__);
  // A private copy of the members (same order), so the new group does not
  // depend on `members` staying alive.
  return std::make_unique<NcclGroup>(members.split(/*color=*/0, /*key=*/members.rank()));
}

}  // namespace llm
