// NCCL's collectives and point-to-point messages over MPI, run on the
// emulated streams.
// Invariants: every call checks its arguments at once (failing with
// ncclGetLastError saying why) and then queues one item on its stream that
// makes the MPI calls; items capture values, never the ncclComm, so that
// ncclCommAbort may free it under queued work. Sums are deterministic and the
// same bits on every member: each element is summed by one member, in fp32,
// adding the members' contributions in rank order from rank 0's, and bf16
// sums are rounded to nearest even once, at the end (NCCL's ring rounds to
// bf16 after every step, so its bf16 sums can differ in the last bits); the
// sums then travel as bits. Messages issued between ncclGroupStart and the
// outermost ncclGroupEnd are queued as one item that posts them all before
// waiting on any, so two members exchanging at once cannot deadlock.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "cuda_emulation/nccl_mpi.h"
#include "cuda_emulation/graphs.h"
#include "cuda_emulation/streams.h"
#include "base/bf16.h"

#define NCCL_EMULATION_TRY(check)                                             \
  do {                                                                        \
    ncclResult_t nccl_emulation_status_ = (check);                            \
    if (nccl_emulation_status_ != ncclSuccess) return nccl_emulation_status_; \
  } while (0)

namespace cuda_emulation::nccl {
namespace {

// The communicator as its queued work sees it: copied values.
struct Members {
  MPI_Comm comm;
  int rank, size;

  // "<call> (rank r of n)", naming the call in the messages of its failures.
  std::string describe(const std::string& call) const {
    return call + " (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
  }
};

// One side of a point-to-point message, as its item posts it.
struct Message {
  bool is_send;
  void* buffer;  // a send's is only read
  int count;
  MPI_Datatype type;
  int peer;
  Members on;
};

// The messages issued since the outermost ncclGroupStart of this thread (as
// on NCCL, a group belongs to the thread that started it).
struct PendingGroup {
  int depth = 0;
  std::vector<Message> messages;
  cudaStream_t stream = nullptr;     // the stream of `messages`, when there are any
  ncclResult_t error = ncclSuccess;  // the first failed call's, which ncclGroupEnd returns
};
thread_local PendingGroup group;

// Every message on a communicator carries this tag, so MPI delivers the
// messages of one pair in the order they were posted; nothing else talks on
// the communicator's own MPI communicator.
constexpr int kMessageTag = 0;

// A failed check: sets the last error and, inside a group, fails the group
// (its ncclGroupEnd returns the error and queues nothing), as NCCL does.
ncclResult_t refuse(ncclResult_t result, const std::string& message) {
  if (group.depth > 0 && group.error == ncclSuccess) group.error = result;
  return set_last_error(result, message);
}

size_t element_bytes(ncclDataType_t type) { return type == ncclFloat32 ? 4 : 2; }

// bf16 travels as bits: the sums are done here, never by MPI.
MPI_Datatype mpi_type(ncclDataType_t type) {
  return type == ncclFloat32 ? MPI_FLOAT : MPI_UINT16_T;
}

ncclResult_t check_comm_and_type(const std::string& call, ncclComm_t comm, ncclDataType_t type) {
  if (!comm) return refuse(ncclInvalidArgument, call + ": comm is NULL");
  if (type != ncclFloat32 && type != ncclBfloat16)
    return refuse(ncclInvalidArgument, call + ": datatype " + std::to_string(type) +
                                           " is neither ncclFloat32 nor ncclBfloat16, the only "
                                           "types the emulation supports");
  return ncclSuccess;
}

// MPI counts are int: a call moving `blocks` blocks of `count` elements (one
// per member, or 1) must stay within INT_MAX elements.
ncclResult_t check_mpi_count(const std::string& call, size_t count, int blocks) {
  if (count > static_cast<size_t>(INT_MAX / blocks))
    return refuse(ncclInvalidArgument, call + ": " + std::to_string(count) + " x " +
                                           std::to_string(blocks) +
                                           " elements exceed the emulation's limit of INT_MAX "
                                           "per MPI call");
  return ncclSuccess;
}

// A buffer of `count` elements of `type`: NULL is refused at once, as NCCL
// does; memory outside the device's allocations (host memory) fails as the
// illegal address NCCL's kernels would meet on a GPU.
ncclResult_t check_buffer(const std::string& call, const char* name, const void* buffer,
                          size_t count, ncclDataType_t type) {
  if (count > 0 && !buffer) return refuse(ncclInvalidArgument, call + ": " + name + " is NULL");
  if (count > 0 && !cuda_emulation::inside_device_allocation(buffer, count * element_bytes(type)))
    return refuse(ncclUnhandledCudaError,
                  call + ": " + name + " is not device memory (" +
                      std::to_string(count * element_bytes(type)) +
                      " bytes outside every live allocation): an illegal address on a GPU");
  return ncclSuccess;
}

ncclResult_t check_reduction(const std::string& call, ncclRedOp_t op) {
  if (op != ncclSum)
    return refuse(ncclInvalidArgument, call + ": reduction " + std::to_string(op) +
                                           " is not ncclSum, the only one the emulation supports");
  return ncclSuccess;
}

// `in_place`: sendbuff is this member's slot of recvbuff (all-gather), recvbuff
// this member's block of sendbuff (reduce-scatter), or the same buffer. Other
// overlaps are undefined on NCCL and refused here.
ncclResult_t check_in_place_or_apart(const std::string& call, bool in_place, const void* send,
                                     size_t send_bytes, const void* recv, size_t recv_bytes) {
  auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  if (!in_place && send_bytes > 0 && recv_bytes > 0 && s < r + recv_bytes && r < s + send_bytes)
    return refuse(ncclInvalidArgument,
                  call + ": sendbuff and recvbuff overlap without the call being in place");
  return ncclSuccess;
}

ncclResult_t check_not_in_group(const std::string& call) {
  if (group.depth > 0)
    return refuse(ncclInvalidUsage, call +
                                        ": the emulation supports only ncclSend / ncclRecv "
                                        "between ncclGroupStart and ncclGroupEnd");
  return ncclSuccess;
}

// Binds the communicator to `stream` on first use; another stream later is refused.
ncclResult_t bind_stream(const std::string& call, ncclComm& comm, cudaStream_t stream) {
  std::lock_guard lock(comm.stream_mutex);
  if (!comm.stream) comm.stream = stream;
  if (*comm.stream == stream) return ncclSuccess;
  return refuse(ncclInvalidUsage, call + ": communicator used on stream " +
                                      std::to_string(cuda_emulation::stream_index(stream)) +
                                      " after stream " +
                                      std::to_string(cuda_emulation::stream_index(*comm.stream)) +
                                      "; the NCCL emulation supports one stream per communicator");
}

ncclResult_t queue(const std::string& call, cudaStream_t stream, cuda_emulation::Work work) {
  // NCCL can be captured on a GPU; its emulation (MPI calls matched once) cannot.
  if (cuda_emulation::is_capturing(stream))
    return refuse(ncclInvalidUsage, call + ": the NCCL emulation cannot be captured in a graph");
  cudaError_t status = cuda_emulation::enqueue(stream, std::move(work));
  if (status != cudaSuccess)
    return refuse(ncclUnhandledCudaError,
                  call + ": the emulated device has failed: " + cudaGetErrorString(status));
  return ncclSuccess;
}

// In queued work: false, after setting the sticky error, if an MPI call failed.
bool mpi_succeeded(const std::string& what, const char* mpi_call, int status) {
  if (status == MPI_SUCCESS) return true;
  cuda_emulation::fail(cudaErrorLaunchFailure,
                       what + ": " + mpi_call + " failed: " + mpi_error_text(status));
  return false;
}

// A collective's result lands late, as a GPU's can while compute goes on:
// its output is poisoned (NaN in fp32 and bf16) for
// LLM_CUDA_EMULATION_COLLECTIVE_LATENCY_US microseconds (default 0), then
// written. A stream that reads the output without waiting for the
// collective then reads NaN instead of stale values that may happen to be
// right (a unit gathered again holds what it held). Tests that check stream
// ordering set it.
std::chrono::microseconds collective_latency() {
  static const std::chrono::microseconds latency = [] {
    const char* value = std::getenv("LLM_CUDA_EMULATION_COLLECTIVE_LATENCY_US");
    return std::chrono::microseconds(value ? std::strtol(value, nullptr, 10) : 0);
  }();
  return latency;
}

void deliver(void* out, const void* result, size_t bytes) {
  if (collective_latency().count() > 0) {
    std::memset(out, 0xFF, bytes);
    std::this_thread::sleep_for(collective_latency());
  }
  std::memcpy(out, result, bytes);
}

// A buffer seen as one block per member: member b's has counts[b] elements at offsets[b].
struct Blocks {
  std::vector<int> counts, offsets;
};

// `count` elements cut into `size` blocks, the first count % size one longer.
Blocks split_evenly(size_t count, int size) {
  Blocks blocks{std::vector<int>(size), std::vector<int>(size)};
  for (int b = 0, offset = 0; b < size; ++b) {
    blocks.counts[b] = static_cast<int>(count / size + (static_cast<size_t>(b) < count % size));
    blocks.offsets[b] = offset;
    offset += blocks.counts[b];
  }
  return blocks;
}

// `contributions`: `size` blocks of n elements, member r's at r * n.
void add_in_rank_order(const void* contributions, int n, int size, ncclDataType_t type, void* sum) {
  const size_t stride = static_cast<size_t>(n);
  if (type == ncclFloat32) {
    const float* in = static_cast<const float*>(contributions);
    float* out = static_cast<float*>(sum);
    std::copy(in, in + n, out);
    for (int r = 1; r < size; ++r)
      for (int i = 0; i < n; ++i) out[i] += in[r * stride + i];
    return;
  }
  const uint16_t* in = static_cast<const uint16_t*>(contributions);
  std::vector<float> total(n);
  for (int i = 0; i < n; ++i) total[i] = llm::bf16_to_float(in[i]);
  for (int r = 1; r < size; ++r)
    for (int i = 0; i < n; ++i) total[i] += llm::bf16_to_float(in[r * stride + i]);
  uint16_t* out = static_cast<uint16_t*>(sum);
  for (int i = 0; i < n; ++i) out[i] = llm::float_to_bf16(total[i]);
}

// In queued work: block b of this member's `send` goes to member b, which sums
// the blocks it receives, one from each member, into its `sum`.
bool sum_blocks(const std::string& what, const Members& on, const void* send, const Blocks& blocks,
                ncclDataType_t type, void* sum) {
  const int mine = blocks.counts[on.rank];
  std::vector<char> contributions(static_cast<size_t>(mine) * on.size * element_bytes(type));
  Blocks received{std::vector<int>(on.size, mine), std::vector<int>(on.size)};
  for (int r = 0; r < on.size; ++r) received.offsets[r] = r * mine;
  const MPI_Datatype t = mpi_type(type);
  int status =
      MPI_Alltoallv(send, blocks.counts.data(), blocks.offsets.data(), t, contributions.data(),
                    received.counts.data(), received.offsets.data(), t, on.comm);
  if (!mpi_succeeded(what, "MPI_Alltoallv", status)) return false;
  add_in_rank_order(contributions.data(), mine, on.size, type, sum);
  return true;
}

// In queued work: posts every message, then waits for all of them.
void post_and_wait(const std::string& what, const std::vector<Message>& messages) {
  std::vector<MPI_Request> requests(messages.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    int status =
        m.is_send
            ? MPI_Isend(m.buffer, m.count, m.type, m.peer, kMessageTag, m.on.comm, &requests[i])
            : MPI_Irecv(m.buffer, m.count, m.type, m.peer, kMessageTag, m.on.comm, &requests[i]);
    // The requests already posted are left behind: the run has failed.
    if (!mpi_succeeded(what, m.is_send ? "MPI_Isend" : "MPI_Irecv", status)) return;
  }
  std::vector<MPI_Status> statuses(messages.size());
  int status = MPI_Waitall(static_cast<int>(requests.size()), requests.data(), statuses.data());
  if (status == MPI_ERR_IN_STATUS)  // the failed message's own error says more
    for (const MPI_Status& s : statuses)
      if (s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING) {
        status = s.MPI_ERROR;
        break;
      }
  mpi_succeeded(what, "MPI_Waitall", status);
}

// ncclSend and ncclRecv: queued alone, or collected when inside a group.
ncclResult_t issue_message(const std::string& call, bool is_send, void* buffer, size_t count,
                           ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  NCCL_EMULATION_TRY(check_comm_and_type(call, comm, type));
  NCCL_EMULATION_TRY(check_mpi_count(call, count, 1));
  NCCL_EMULATION_TRY(check_buffer(call, is_send ? "sendbuff" : "recvbuff", buffer, count, type));
  if (peer < 0 || peer >= comm->size)
    return refuse(ncclInvalidArgument, call + ": peer " + std::to_string(peer) + " outside [0, " +
                                           std::to_string(comm->size) + ")");
  if (group.depth > 0 && !group.messages.empty() && group.stream != stream)
    return refuse(ncclInvalidUsage, call +
                                        ": the emulation runs a group as one item on one "
                                        "stream, and this group already has messages on another");
  NCCL_EMULATION_TRY(bind_stream(call, *comm, stream));
  if (count == 0) return ncclSuccess;  // no message on either side, as on NCCL

  const Members on{comm->mpi_comm, comm->rank, comm->size};
  Message message{is_send, buffer, static_cast<int>(count), mpi_type(type), peer, on};
  if (group.depth > 0) {
    group.stream = stream;
    group.messages.push_back(message);
    return ncclSuccess;
  }
  std::string what = on.describe(call + " peer " + std::to_string(peer));
  return queue(call, stream, [what, message] { post_and_wait(what, {message}); });
}

}  // namespace
}  // namespace cuda_emulation::nccl

using namespace cuda_emulation::nccl;

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  const std::string call = "ncclAllReduce";
  NCCL_EMULATION_TRY(check_not_in_group(call));
  NCCL_EMULATION_TRY(check_comm_and_type(call, comm, datatype));
  NCCL_EMULATION_TRY(check_reduction(call, op));
  NCCL_EMULATION_TRY(check_mpi_count(call, count, 1));
  NCCL_EMULATION_TRY(check_buffer(call, "sendbuff", sendbuff, count, datatype));
  NCCL_EMULATION_TRY(check_buffer(call, "recvbuff", recvbuff, count, datatype));
  const size_t bytes = count * element_bytes(datatype);
  NCCL_EMULATION_TRY(
      check_in_place_or_apart(call, sendbuff == recvbuff, sendbuff, bytes, recvbuff, bytes));
  NCCL_EMULATION_TRY(bind_stream(call, *comm, stream));
  if (count == 0) return ncclSuccess;

  const Members on{comm->mpi_comm, comm->rank, comm->size};
  return queue(call, stream, [what = on.describe(call), on, sendbuff, recvbuff, count, datatype] {
    // NCCL does not compare the members' counts: on an H100 (2026-11-27) an
    // all-reduce one element short on one of two ranks completed on both.
    // So it completes here: the members reduce the prefix they all passed,
    // and a longer buffer keeps its own values past it (NCCL's are undefined).
    unsigned long long mine = count, shortest = 0;
    if (!mpi_succeeded(
            what, "MPI_Allreduce",
            MPI_Allreduce(&mine, &shortest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, on.comm)))
      return;
    // Each member sums one block of the prefix, then every member gathers the sums.
    const Blocks blocks = split_evenly(shortest, on.size);
    std::vector<char> sum(static_cast<size_t>(blocks.counts[on.rank]) * element_bytes(datatype));
    if (!sum_blocks(what, on, sendbuff, blocks, datatype, sum.data())) return;
    const MPI_Datatype t = mpi_type(datatype);
    std::vector<char> result(count * element_bytes(datatype));
    const size_t prefix_bytes = shortest * element_bytes(datatype);
    std::memcpy(result.data() + prefix_bytes, static_cast<const char*>(sendbuff) + prefix_bytes,
                result.size() - prefix_bytes);
    if (mpi_succeeded(what, "MPI_Allgatherv",
                      MPI_Allgatherv(sum.data(), blocks.counts[on.rank], t, result.data(),
                                     blocks.counts.data(), blocks.offsets.data(), t, on.comm)))
      deliver(recvbuff, result.data(), result.size());
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  const std::string call = "ncclReduceScatter";
  NCCL_EMULATION_TRY(check_not_in_group(call));
  NCCL_EMULATION_TRY(check_comm_and_type(call, comm, datatype));
  NCCL_EMULATION_TRY(check_reduction(call, op));
  NCCL_EMULATION_TRY(check_mpi_count(call, recvcount, comm->size));
  NCCL_EMULATION_TRY(check_buffer(call, "sendbuff", sendbuff, recvcount * comm->size, datatype));
  NCCL_EMULATION_TRY(check_buffer(call, "recvbuff", recvbuff, recvcount, datatype));
  const size_t chunk = recvcount * element_bytes(datatype);
  const bool in_place = recvbuff == static_cast<const char*>(sendbuff) + comm->rank * chunk;
  NCCL_EMULATION_TRY(
      check_in_place_or_apart(call, in_place, sendbuff, comm->size * chunk, recvbuff, chunk));
  NCCL_EMULATION_TRY(bind_stream(call, *comm, stream));
  if (recvcount == 0) return ncclSuccess;

  const Members on{comm->mpi_comm, comm->rank, comm->size};
  return queue(call, stream,
               [what = on.describe(call), on, sendbuff, recvbuff, recvcount, datatype] {
                 // The sum is delivered after Alltoallv has read all of sendbuff,
                 // which makes the in-place call safe.
                 std::vector<char> sum(recvcount * element_bytes(datatype));
                 if (sum_blocks(what, on, sendbuff, split_evenly(recvcount * on.size, on.size),
                                datatype, sum.data()))
                   deliver(recvbuff, sum.data(), sum.size());
               });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  const std::string call = "ncclAllGather";
  NCCL_EMULATION_TRY(check_not_in_group(call));
  NCCL_EMULATION_TRY(check_comm_and_type(call, comm, datatype));
  NCCL_EMULATION_TRY(check_mpi_count(call, sendcount, comm->size));
  NCCL_EMULATION_TRY(check_buffer(call, "sendbuff", sendbuff, sendcount, datatype));
  NCCL_EMULATION_TRY(check_buffer(call, "recvbuff", recvbuff, sendcount * comm->size, datatype));
  const size_t chunk = sendcount * element_bytes(datatype);
  const bool in_place = sendbuff == static_cast<const char*>(recvbuff) + comm->rank * chunk;
  NCCL_EMULATION_TRY(
      check_in_place_or_apart(call, in_place, sendbuff, chunk, recvbuff, comm->size * chunk));
  NCCL_EMULATION_TRY(bind_stream(call, *comm, stream));
  if (sendcount == 0) return ncclSuccess;

  const Members on{comm->mpi_comm, comm->rank, comm->size};
  return queue(call, stream,
               [what = on.describe(call), on, sendbuff, recvbuff, sendcount, datatype] {
                 const MPI_Datatype t = mpi_type(datatype);
                 const int n = static_cast<int>(sendcount);
                 const size_t chunk = sendcount * element_bytes(datatype);
                 std::vector<char> gathered(chunk * on.size);
                 if (mpi_succeeded(what, "MPI_Allgather",
                                   MPI_Allgather(sendbuff, n, t, gathered.data(), n, t, on.comm)))
                   deliver(recvbuff, gathered.data(), gathered.size());
               });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const std::string call = "ncclBroadcast";
  NCCL_EMULATION_TRY(check_not_in_group(call));
  NCCL_EMULATION_TRY(check_comm_and_type(call, comm, datatype));
  if (root < 0 || root >= comm->size)
    return refuse(ncclInvalidArgument, call + ": root " + std::to_string(root) + " outside [0, " +
                                           std::to_string(comm->size) + ")");
  NCCL_EMULATION_TRY(check_mpi_count(call, count, 1));
  const bool is_root = comm->rank == root;
  const size_t bytes = count * element_bytes(datatype);
  if (is_root) {  // the other members' sendbuff is unused
    NCCL_EMULATION_TRY(check_buffer(call, "sendbuff", sendbuff, count, datatype));
    NCCL_EMULATION_TRY(
        check_in_place_or_apart(call, sendbuff == recvbuff, sendbuff, bytes, recvbuff, bytes));
  }
  NCCL_EMULATION_TRY(check_buffer(call, "recvbuff", recvbuff, count, datatype));
  NCCL_EMULATION_TRY(bind_stream(call, *comm, stream));
  if (count == 0) return ncclSuccess;

  const Members on{comm->mpi_comm, comm->rank, comm->size};
  return queue(call, stream,
               [what = on.describe(call), on, sendbuff, recvbuff, count, datatype, root, bytes] {
                 std::vector<char> data(bytes);
                 if (on.rank == root) std::memcpy(data.data(), sendbuff, bytes);
                 if (mpi_succeeded(what, "MPI_Bcast",
                                   MPI_Bcast(data.data(), static_cast<int>(count),
                                             mpi_type(datatype), root, on.comm)))
                   deliver(recvbuff, data.data(), bytes);
               });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  // Only MPI_Isend ever touches the buffer, and it only reads it.
  return issue_message("ncclSend", /*is_send=*/true, const_cast<void*>(sendbuff), count, datatype,
                       peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return issue_message("ncclRecv", /*is_send=*/false, recvbuff, count, datatype, peer, comm,
                       stream);
}

ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group.depth == 0) return refuse(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart to end");
  if (--group.depth > 0) return ncclSuccess;  // an inner group: the outermost one issues
  std::vector<Message> messages = std::exchange(group.messages, {});
  // A failed call inside the group has set the last error; nothing is queued.
  if (ncclResult_t error = std::exchange(group.error, ncclSuccess); error != ncclSuccess)
    return error;
  if (messages.empty()) return ncclSuccess;
  std::string what = messages.front().on.describe(
      "ncclGroupEnd (" + std::to_string(messages.size()) + " sends / receives)");
  return queue("ncclGroupEnd", group.stream,
               [what, messages = std::move(messages)] { post_and_wait(what, messages); });
}
