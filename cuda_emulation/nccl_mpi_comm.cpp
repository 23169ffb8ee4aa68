// NCCL communicators over MPI: unique ids, creation, destruction, and the
// error strings.
// Invariants: an id names its creator (its MPI_COMM_WORLD rank) and the
// creator's serial number for it; ncclCommInitRank is collective over the
// members only (point-to-point on MPI_COMM_WORLD with tags reserved for ids,
// then MPI_Comm_create_group), never over the world, so groups on disjoint
// ranks may be made at the same time; the creator checks every member's
// arguments and all members get the same verdict, so a disagreement fails on
// every member instead of hanging some; a non-blocking creation runs that
// exchange on a thread of its own and publishes its result last.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "cuda_emulation/nccl_mpi.h"
#include "cuda_emulation/streams.h"

namespace cuda_emulation::nccl {
namespace {

thread_local std::string last_error;

constexpr uint64_t kIdMagic = 0x314c43434e4d4c4cull;  // "LLMNCCL1" as little-endian bytes

struct IdContents {
  uint64_t magic;
  int32_t creator;  // MPI_COMM_WORLD rank of the process that made the id
  uint32_t serial;  // how many ids that process had made before this one
};
static_assert(sizeof(IdContents) <= NCCL_UNIQUE_ID_BYTES);

std::atomic<uint32_t> ids_made{0};

// The id exchange talks on MPI_COMM_WORLD, whose other point-to-point user
// (comm_mpi.cpp) sends with tag 0. Tags 2^14 to 2^15 - 1 (MPI guarantees tags
// up to 32767) are reserved for it, three per id, so that the messages of two
// ids of one creator never match each other unless some 5000 ids lie between.
enum class IdTag { hello = 0, reply = 1, create = 2 };
constexpr int kFirstIdTag = 1 << 14;
constexpr int kTagsPerId = 3;
constexpr uint32_t kIdsPerTagCycle = ((1 << 15) - kFirstIdTag) / kTagsPerId;

int id_tag(uint32_t serial, IdTag which) {
  return kFirstIdTag + static_cast<int>(serial % kIdsPerTagCycle) * kTagsPerId +
         static_cast<int>(which);
}

bool mpi_active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// A member's hello to the creator: {serial, nranks, rank}. The creator's
// reply: {0, world rank of NCCL rank 0, of rank 1, ...}, or {1} (refused).
constexpr int kHelloInts = 3;
constexpr int kAccepted = 0, kRefused = 1;

// On the creator: receives the other members' hellos, checks them against its
// own arguments, and answers every one. Returns the refusal's reason, or ""
// with `members` (world ranks by NCCL rank) filled in.
std::string collect_members(const IdContents& id, int nranks, int rank, std::vector<int>& members) {
  members.assign(nranks, -1);
  std::string problem;
  if (rank < 0 || rank >= nranks)
    problem = "the creator passed rank " + std::to_string(rank) + " outside [0, " +
              std::to_string(nranks) + ")";
  else
    members[rank] = id.creator;
  std::vector<int> senders;
  for (int heard = 1; heard < nranks; ++heard) {
    int hello[kHelloInts];
    MPI_Status status;
    MPI_Recv(hello, kHelloInts, MPI_INT, MPI_ANY_SOURCE, id_tag(id.serial, IdTag::hello),
             MPI_COMM_WORLD, &status);
    const int sender = status.MPI_SOURCE, their_nranks = hello[1], their_rank = hello[2];
    const std::string who = "world rank " + std::to_string(sender);
    senders.push_back(sender);
    if (!problem.empty()) continue;  // the first problem is the one reported
    if (hello[0] != static_cast<int>(id.serial))
      problem = who + " answered another id of the same creator (too many ids in flight)";
    else if (their_nranks != nranks)
      problem = who + " passed nranks " + std::to_string(their_nranks) + ", the creator " +
                std::to_string(nranks);
    else if (their_rank < 0 || their_rank >= nranks)
      problem = who + " passed rank " + std::to_string(their_rank) + " outside [0, " +
                std::to_string(nranks) + ")";
    else if (members[their_rank] != -1)
      problem = "rank " + std::to_string(their_rank) + " was passed by world ranks " +
                std::to_string(members[their_rank]) + " and " + std::to_string(sender);
    else
      members[their_rank] = sender;
  }
  std::vector<int> reply{problem.empty() ? kAccepted : kRefused};
  if (problem.empty()) reply.insert(reply.end(), members.begin(), members.end());
  for (int sender : senders)
    MPI_Send(reply.data(), static_cast<int>(reply.size()), MPI_INT, sender,
             id_tag(id.serial, IdTag::reply), MPI_COMM_WORLD);
  return problem;
}

// On any other member: says hello to the creator and waits for its verdict.
std::string ask_creator_for_members(const IdContents& id, int nranks, int rank,
                                    std::vector<int>& members) {
  int hello[kHelloInts] = {static_cast<int>(id.serial), nranks, rank};
  MPI_Send(hello, kHelloInts, MPI_INT, id.creator, id_tag(id.serial, IdTag::hello), MPI_COMM_WORLD);
  MPI_Message message;
  MPI_Status status;
  MPI_Mprobe(id.creator, id_tag(id.serial, IdTag::reply), MPI_COMM_WORLD, &message, &status);
  int length = 0;
  MPI_Get_count(&status, MPI_INT, &length);
  std::vector<int> reply(length);
  MPI_Mrecv(reply.data(), length, MPI_INT, &message, MPI_STATUS_IGNORE);
  if (reply.empty() || reply[0] != kAccepted)
    return "the members' nranks / rank arguments disagree (the creator, world rank " +
           std::to_string(id.creator) + ", reports how)";
  members.assign(reply.begin() + 1, reply.end());
  return "";
}

// The MPI communicator over `members`, ordered as given; collective over them only.
MPI_Comm create_members_comm(const std::vector<int>& members, const IdContents& id) {
  MPI_Group world_group, members_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, static_cast<int>(members.size()), members.data(), &members_group);
  MPI_Comm comm;
  MPI_Comm_create_group(MPI_COMM_WORLD, members_group, id_tag(id.serial, IdTag::create), &comm);
  MPI_Group_free(&members_group);
  MPI_Group_free(&world_group);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

// Waits until everything queued on the communicator's stream so far has run
// or been skipped. False when the stream has failed before the wait could be
// queued: an earlier item may then still be running on the communicator.
bool drain_stream(ncclComm& comm) {
  std::optional<cudaStream_t> stream;
  {
    std::lock_guard lock(comm.stream_mutex);
    stream = comm.stream;
  }
  if (!stream) return true;
  auto reached = std::make_shared<std::promise<void>>();
  std::future<void> drained = reached->get_future();
  // A skipped item is destroyed unrun, which breaks the promise: either way
  // the future becomes ready once the items before it are done.
  if (cuda_emulation::enqueue(*stream, [reached] { reached->set_value(); }) != cudaSuccess)
    return false;
  drained.wait();
  return true;
}

}  // namespace

ncclResult_t set_last_error(ncclResult_t result, const std::string& message) {
  last_error = message;
  return result;
}

std::string mpi_error_text(int mpi_error) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(mpi_error, text, &length);
  return std::string(text, length);
}

}  // namespace cuda_emulation::nccl

using cuda_emulation::nccl::set_last_error;

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclInProgress:
      return "NCCL operation in progress";
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t) { return cuda_emulation::nccl::last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  using namespace cuda_emulation::nccl;
  if (!unique_id) return set_last_error(ncclInvalidArgument, "ncclGetUniqueId: unique_id is NULL");
  if (!mpi_active())
    return set_last_error(ncclInvalidUsage,
                          "ncclGetUniqueId: MPI is not initialized (the "
                          "emulation runs NCCL over MPI)");
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  IdContents id{kIdMagic, world_rank, ids_made.fetch_add(1)};
  std::memset(unique_id->internal, 0, sizeof(unique_id->internal));
  std::memcpy(unique_id->internal, &id, sizeof(id));
  return ncclSuccess;
}

namespace cuda_emulation::nccl {
namespace {

// What can be checked before talking to the other members: MPI's state, the
// id, and (on the creator, who counts the others' hellos) nranks.
ncclResult_t check_creation(const std::string& call, int nranks, const IdContents& id) {
  if (!mpi_active())
    return set_last_error(ncclInvalidUsage,
                          call + ": MPI is not initialized (the emulation runs NCCL over MPI)");
  int thread_level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&thread_level);
  if (thread_level < MPI_THREAD_MULTIPLE)
    return set_last_error(ncclInvalidUsage,
                          call + ": MPI was initialized with thread level " +
                              std::to_string(thread_level) +
                              "; the NCCL emulation calls MPI from stream threads and needs "
                              "MPI_THREAD_MULTIPLE");
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (id.magic != kIdMagic || id.creator < 0 || id.creator >= world_size)
    return set_last_error(ncclInvalidArgument,
                          call + ": comm_id was not made by ncclGetUniqueId in this job");
  // The creator cannot count the hellos to wait for without a sane nranks:
  // the other members are left waiting, as on NCCL.
  if (world_rank == id.creator && (nranks < 1 || nranks > world_size))
    return set_last_error(ncclInvalidArgument, call + ": nranks " + std::to_string(nranks) +
                                                   " outside [1, " + std::to_string(world_size) +
                                                   "] (the job's process count)");
  return ncclSuccess;
}

// Meets the other members (blocking until every one has called) and fills
// `comm`'s MPI communicator, rank and size.
ncclResult_t join_members(const std::string& call, ncclComm& comm, int nranks, const IdContents& id,
                          int rank) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  std::vector<int> members;
  const std::string problem = world_rank == id.creator
                                  ? collect_members(id, nranks, rank, members)
                                  : ask_creator_for_members(id, nranks, rank, members);
  if (!problem.empty()) return set_last_error(ncclInvalidArgument, call + ": " + problem);
  comm.mpi_comm = create_members_comm(members, id);
  comm.rank = rank;
  comm.size = nranks;
  return ncclSuccess;
}

}  // namespace
}  // namespace cuda_emulation::nccl

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  return ncclCommInitRankConfig(comm, nranks, comm_id, rank, &config);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank,
                                    ncclConfig_t* config) {
  using namespace cuda_emulation::nccl;
  const std::string call = "ncclCommInitRank";
  if (!comm) return set_last_error(ncclInvalidArgument, call + ": comm is NULL");
  *comm = nullptr;
  if (config && config->magic != 0xcafebeef)
    return set_last_error(ncclInvalidArgument,
                          call + ": config was not initialized with NCCL_CONFIG_INITIALIZER");
  IdContents id;
  std::memcpy(&id, comm_id.internal, sizeof(id));
  if (ncclResult_t refused = check_creation(call, nranks, id); refused != ncclSuccess)
    return refused;

  auto created = std::make_unique<ncclComm>();
  if (config && config->blocking == 0) {
    // Made on a thread of its own; the caller polls ncclCommGetAsyncError.
    // The thread writes `state` last: after that it touches nothing.
    ncclComm* pending = created.release();
    pending->state = ncclInProgress;
    std::thread([pending, call, nranks, id, rank] {
      const ncclResult_t result = join_members(call, *pending, nranks, id, rank);
      if (result != ncclSuccess) pending->creation_error = ncclGetLastError(nullptr);
      pending->state = result;
    }).detach();
    *comm = pending;
    return ncclInProgress;
  }
  if (ncclResult_t failed = join_members(call, *created, nranks, id, rank); failed != ncclSuccess)
    return failed;
  *comm = created.release();
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  using namespace cuda_emulation::nccl;
  if (!comm || !async_error)
    return set_last_error(ncclInvalidArgument,
                          "ncclCommGetAsyncError: comm or async_error is NULL");
  *async_error = comm->state;
  if (*async_error != ncclSuccess && *async_error != ncclInProgress)
    set_last_error(*async_error, comm->creation_error);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  using namespace cuda_emulation::nccl;
  if (!comm) return ncclSuccess;  // as NCCL
  if (comm->state == ncclInProgress)
    return set_last_error(ncclInvalidUsage,
                          "ncclCommDestroy: the communicator is still being made (abort it)");
  std::unique_ptr<ncclComm> owned(comm);
  if (!drain_stream(*comm))
    return set_last_error(ncclUnhandledCudaError,
                          "ncclCommDestroy: the emulated device has failed and queued work may "
                          "still use the communicator; its MPI communicator is left allocated");
  if (!mpi_active()) return ncclSuccess;  // MPI_Finalize has released it
  int status = MPI_Comm_free(&comm->mpi_comm);
  if (status != MPI_SUCCESS)
    return set_last_error(ncclSystemError,
                          "ncclCommDestroy: MPI_Comm_free failed: " + mpi_error_text(status));
  return ncclSuccess;
}

// Releases the communicator without calling MPI: MPI_Comm_free is collective
// in the MPI standard and the peers may never reach it, and work queued before
// the failure may still be using the MPI communicator. The process is on its
// way out, so leaking the MPI communicator costs nothing.
// A communicator still being made is left to its creating thread (which
// may wait forever for a lost member) and never freed.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm && comm->state != ncclInProgress) delete comm;
  return ncclSuccess;
}
