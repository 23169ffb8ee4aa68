// What the two halves of the NCCL stand-in share: the communicator and this
// thread's last-error message.
// Invariants: a communicator's MPI communicator holds exactly its members,
// ordered by NCCL rank (MPI rank == NCCL rank), with MPI_ERRORS_RETURN so
// that queued work reports MPI failures instead of MPI aborting the job;
// once used, a communicator stays bound to that one stream.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>

struct ncclComm {
  MPI_Comm mpi_comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;

  // The stream of its first operation. MPI needs each communicator's
  // collectives in the same order on every member; one stream runs them in
  // issue order, two would not.
  std::mutex stream_mutex;
  std::optional<cudaStream_t> stream;

  // Non-blocking creation: the state the creating thread leaves (set last,
  // after everything else it writes), and its error message.
  std::atomic<ncclResult_t> state{ncclSuccess};
  std::string creation_error;
};

namespace cuda_emulation::nccl {

// Sets this thread's last-error message and returns `result`, so a failing
// check reads `return set_last_error(ncclInvalidArgument, "...")`.
ncclResult_t set_last_error(ncclResult_t result, const std::string& message);

// MPI's text for an MPI error code.
std::string mpi_error_text(int mpi_error);

}  // namespace cuda_emulation::nccl
