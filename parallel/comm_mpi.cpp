// Group over an MPI communicator (host buffers), plus the MPI world: init at
// first use, finalize at exit, node-local ranks, abort.
// Invariants: each collective is one nonblocking MPI call whose handle waits
// on its request, each point-to-point call one or two (MPI_Isend / MPI_Irecv,
// all with one tag, so MPI's per-pair ordering is comm.h's); bf16 sums are
// done in fp32 and rounded to nearest even after every partial sum; every
// collective adds its ring-algorithm traffic to stats_, every send its bytes.
#include <mpi.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/bf16.h"
#include "device/device.h"
#include "base/error.h"
#include "base/exit_status.h"
#include "base/fault_hooks.h"
#include "parallel/comm.h"
#include "parallel/watchdog_mpi.h"
#include "collectives/watchdog.h"

namespace llm {
namespace {

bool mpi_active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// User reduction for bf16: inout[i] = bf16(float(in[i]) + float(inout[i])).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

// A 2-byte datatype of its own, so that MPI's built-in integer SUM can never
// be applied to bf16 by mistake. Created once, after MPI_Init; MPI_Finalize
// releases it.
MPI_Datatype mpi_bf16_type() {
  static MPI_Datatype type = [] {
    MPI_Datatype t;
    MPI_Type_contiguous(2, MPI_BYTE, &t);
    MPI_Type_commit(&t);
    return t;
  }();
  return type;
}

MPI_Op mpi_bf16_sum_op() {
  static MPI_Op op = [] {
    MPI_Op o;
    MPI_Op_create(&bf16_sum, /*commute=*/1, &o);
    return o;
  }();
  return op;
}

MPI_Datatype mpi_type(WireType type) { return type == WireType::f32 ? MPI_FLOAT : mpi_bf16_type(); }
MPI_Op mpi_sum(WireType type) { return type == WireType::f32 ? MPI_SUM : mpi_bf16_sum_op(); }

// MPI counts are int; larger buffers must be split by the caller.
int mpi_count(size_t count, const char* collective) {
  LLM_CHECK(count <= static_cast<size_t>(INT_MAX),
            "{}: count {} exceeds the MPI limit of {} elements per call", collective, count,
            INT_MAX);
  return static_cast<int>(count);
}

// The world rank of each member of `comm`.
std::vector<int> world_ranks_of(MPI_Comm comm) {
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int size = 0;
  MPI_Group_size(group, &size);
  std::vector<int> members(static_cast<size_t>(size)), ranks(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) members[static_cast<size_t>(i)] = i;
  MPI_Group_translate_ranks(group, size, members.data(), world, ranks.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return ranks;
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

// Waits, under the watchdog, on `request` and `second` (send_recv's other
// half; MPI_REQUEST_NULL, which completes at once, when there is none).
CommHandle wait_on(GroupTrace& trace, const OpRecord& op, MPI_Request request,
                   MPI_Request second = MPI_REQUEST_NULL) {
  return CommHandle([&trace, op, requests = std::array{request, second}]() mutable {
    watchdog_wait(trace, op, [&] {
      int done = 0;
      MPI_Testall(2, requests.data(), &done, MPI_STATUSES_IGNORE);
      return done != 0;
    });
  });
}

class MpiGroup : public Group {
 public:
  // `owned` communicators (from split) are freed with the group.
  MpiGroup(MPI_Comm comm, bool owned, std::string label) : comm_(comm), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    trace_.label = std::move(label);
    trace_.world_ranks = world_ranks_of(comm_);
  }
  ~MpiGroup() override {
    if (owned_ && mpi_active()) MPI_Comm_free(&comm_);
  }
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  CommHandle all_reduce_async(void* data, size_t count, WireType type) override {
    int n = mpi_count(count, "all_reduce");
    count_all_reduce(count, type);
    const OpRecord& op = issue("all_reduce", count, type);
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, data, n, mpi_type(type), mpi_sum(type), comm_, &request);
    return wait_on(trace_, op, request);
  }

  CommHandle reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                  WireType type) override {
    int n = mpi_count(recv_count, "reduce_scatter");
    uint64_t chunk = recv_count * wire_bytes(type);
    LLM_CHECK(!overlaps(send, size_ * chunk, recv, chunk),
              "reduce_scatter: send and recv buffers overlap");
    count_reduce_scatter(recv_count, type);
    const OpRecord& op = issue("reduce_scatter", size_ * recv_count, type);
    MPI_Request request;
    MPI_Ireduce_scatter_block(send, recv, n, mpi_type(type), mpi_sum(type), comm_, &request);
    return wait_on(trace_, op, request);
  }

  // send may be this member's own slot of recv (the shard living inside the
  // full buffer): that is MPI's in-place all-gather.
  CommHandle all_gather_async(const void* send, void* recv, size_t send_count,
                              WireType type) override {
    int n = mpi_count(send_count, "all_gather");
    uint64_t chunk = send_count * wire_bytes(type);
    const void* own_slot = static_cast<const char*>(recv) + rank_ * chunk;
    bool in_place = send == own_slot;
    LLM_CHECK(in_place || !overlaps(send, chunk, recv, size_ * chunk),
              "all_gather: send overlaps recv without being this member's slot of it");
    count_all_gather(send_count, type);
    const OpRecord& op = issue("all_gather", size_ * send_count, type);
    MPI_Request request;
    MPI_Datatype t = mpi_type(type);
    MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, t, recv, n, t, comm_, &request);
    return wait_on(trace_, op, request);
  }

  CommHandle broadcast_async(void* data, size_t count, WireType type, int root) override {
    int n = mpi_count(count, "broadcast");
    LLM_CHECK(root >= 0 && root < size_, "broadcast: root {} outside a group of {}", root, size_);
    count_broadcast(count, type);
    const OpRecord& op = issue("broadcast", count, type);
    MPI_Request request;
    MPI_Ibcast(data, n, mpi_type(type), root, comm_, &request);
    return wait_on(trace_, op, request);
  }

  CommHandle send_async(const void* data, size_t count, WireType type, int peer) override {
    check_peer("send", peer);
    int n = mpi_count(count, "send");
    count_send(count, type);
    const OpRecord& op = issue("send", count, type, peer);
    return wait_on(trace_, op, post_send(data, n, type, peer));
  }

  CommHandle recv_async(void* data, size_t count, WireType type, int peer) override {
    check_peer("recv", peer);
    const OpRecord& op = issue("recv", count, type, peer);
    return wait_on(trace_, op, post_recv(data, mpi_count(count, "recv"), type, peer));
  }

  CommHandle send_recv_async(const void* send, size_t send_count, int send_peer, void* recv,
                             size_t recv_count, int recv_peer, WireType type) override {
    if (send_count > 0) check_peer("send_recv (send)", send_peer);
    if (recv_count > 0) check_peer("send_recv (recv)", recv_peer);
    int send_n = mpi_count(send_count, "send_recv"), recv_n = mpi_count(recv_count, "send_recv");
    LLM_CHECK(!overlaps(send, send_count * wire_bytes(type), recv, recv_count * wire_bytes(type)),
              "send_recv: send and recv buffers overlap");
    count_send(send_count, type);
    const OpRecord& op =
        issue("send_recv", send_count + recv_count, type, send_count > 0 ? send_peer : recv_peer);
    MPI_Request received = post_recv(recv, recv_n, type, recv_peer);
    return wait_on(trace_, op, post_send(send, send_n, type, send_peer), received);
  }

  void barrier() override {
    const OpRecord& op = issue("barrier", 0, WireType::f32);
    MPI_Request request;
    MPI_Ibarrier(comm_, &request);
    wait_on(trace_, op, request).wait();
  }

  std::unique_ptr<Group> split(int color, int key) override {
    LLM_CHECK(color >= 0, "split: color {} must be non-negative", color);
    MPI_Comm sub;
    MPI_Comm_split(comm_, color, key, &sub);
    return std::make_unique<MpiGroup>(sub, /*owned=*/true,
                                      fmt::format("{}.{}", trace_.label, splits_++));
  }

  double all_reduce_sum(double value) override {
    if (skips_this_all_reduce_sum()) return value;
    const OpRecord& op = watchdog_issue(trace_, "all_reduce_sum", sizeof(double), "f64");
    double sum = 0;
    MPI_Request request;
    MPI_Iallreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm_, &request);
    wait_on(trace_, op, request).wait();
    return sum;
  }

 private:
  // Every message carries this tag: MPI then matches the messages of one
  // (sender, receiver) pair in the order they were sent. The collectives on
  // comm_ never see them (MPI keeps collective and point-to-point traffic apart).
  static constexpr int kTag = 0;

  // A nonblocking send / receive of n elements; no message (MPI_REQUEST_NULL)
  // when n is 0, as on NCCL.
  MPI_Request post_send(const void* data, int n, WireType type, int peer) {
    MPI_Request request = MPI_REQUEST_NULL;
    if (n > 0) MPI_Isend(data, n, mpi_type(type), peer, kTag, comm_, &request);
    return request;
  }
  MPI_Request post_recv(void* data, int n, WireType type, int peer) {
    MPI_Request request = MPI_REQUEST_NULL;
    if (n > 0) MPI_Irecv(data, n, mpi_type(type), peer, kTag, comm_, &request);
    return request;
  }

  // The test hook of docs/testing.md: LLM_FAULT_SKIP_ALL_REDUCE_SUM=R:N makes
  // world rank R skip its N-th all_reduce_sum, as a rank that lost track of
  // the collectives would, so that the watchdog's naming of it is tested.
  static bool skips_this_all_reduce_sum() {
    static const RankFault fault = rank_fault_from_env("LLM_FAULT_SKIP_ALL_REDUCE_SUM");
    static int64_t calls = 0;
    if (fault.rank < 0) return false;
    int world = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    return world == fault.rank && ++calls == fault.value;
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  int splits_ = 0;  // names the next split's group
};

void finalize_mpi() {
  if (mpi_active()) MPI_Finalize();
}

MPI_Comm init_mpi_world() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Only the main thread calls MPI (OpenMP threads never do), except under
    // the CUDA emulation, whose NCCL runs on MPI from its stream threads.
    const int needed = kCudaEmulated ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, needed, &provided);
    LLM_CHECK(provided >= needed, "MPI provides thread level {}, need {}", provided, needed);
    // Registered during the world's construction, so it runs after the
    // world's destructor.
    std::atexit(finalize_mpi);
    watchdog_mpi_install();
  }
  return MPI_COMM_WORLD;
}

struct NodeRanks {
  int rank = 0, size = 1;
  std::vector<std::string> nccl_host_ids;
};

// Each member's `value`, in rank order (collective over `comm`).
std::vector<std::string> gather_strings(MPI_Comm comm, int size, const std::string& value) {
  const int length = static_cast<int>(value.size());
  std::vector<int> lengths(size), offsets(size);
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(value.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                 MPI_CHAR, comm);
  std::vector<std::string> values;
  for (int r = 0; r < size; ++r) values.push_back(all.substr(offsets[r], lengths[r]));
  return values;
}

const NodeRanks& node_ranks() {
  static NodeRanks node = [] {
    comm_world();
    MPI_Comm node_comm;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm);
    NodeRanks r;
    MPI_Comm_rank(node_comm, &r.rank);
    MPI_Comm_size(node_comm, &r.size);
    const char* host_id = std::getenv("NCCL_HOSTID");
    r.nccl_host_ids = gather_strings(node_comm, r.size, host_id ? host_id : "");
    MPI_Comm_free(&node_comm);
    return r;
  }();
  return node;
}

}  // namespace

Group& comm_world() {
  static MpiGroup world(init_mpi_world(), /*owned=*/false, "world");
  return world;
}

int comm_local_rank() { return node_ranks().rank; }
int comm_local_size() { return node_ranks().size; }

const std::vector<std::string>& comm_local_nccl_host_ids() { return node_ranks().nccl_host_ids; }

void comm_abort(const std::string& message, int status) {
  int rank = 0, size = 1;
  bool active = mpi_active();
  if (active) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  // The collectives that led here, for tools/flight_recorder.py.
  const std::string where = flight_recorder_note("fatal error: " + message);
  // One process has no ranks to tell apart.
  if (size > 1)
    std::fprintf(stderr, "rank %d: error: %s%s\n", rank, message.c_str(), where.c_str());
  else
    std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
  watchdog_run_abort_hooks();  // NCCL's communicators, so the GPU is released
  if (active && size > 1) MPI_Abort(MPI_COMM_WORLD, status);
  std::exit(status);
}

void comm_abort_collective(const std::string& message) {
  const int rank = comm_world().rank();  // joins the world if the error came first
  if (rank == 0) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    std::fflush(stderr);
  }
  // A bounded barrier: it completes only if every rank failed alike.
  constexpr auto kWait = std::chrono::seconds(10);
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  int done = 0;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!done) comm_abort(message);
  std::exit(kExitError);
}

}  // namespace llm
