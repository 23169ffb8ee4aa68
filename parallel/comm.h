// The MPI world of this process: its Group (collectives/group.h) and its ranks,
// and the abort paths that take every rank down with one message.
// Invariant: MPI is initialized on first use and finalized at exit; without
// mpirun the world is a world of one.
#pragma once

#include <string>
#include <vector>

#include "collectives/group.h"
#include "base/exit_status.h"

namespace llm {

// The MPI world of this process (MPI is initialized on first use and
// finalized at exit). Without mpirun it is a world of one.
Group& comm_world();
// Ranks of this process's node (for one-device-per-rank placement), and each
// one's NCCL_HOSTID ("" where unset; parallel/nccl_placement.h), in
// node-local rank order. Found once, at the first call of any of the three,
// which is collective over the world.
int comm_local_rank();
int comm_local_size();
const std::vector<std::string>& comm_local_nccl_host_ids();
// Prints "rank R: error: <message>" to stderr and takes every rank down
// (MPI_Abort) so that no rank waits forever on a dead peer; the job exits
// with `status` (base/exit_status.h).
[[noreturn]] void comm_abort(const std::string& message, int status = kExitError);
// For an error every rank raises alike (command line, config): rank 0 prints
// "error: <message>" once and every rank exits with status 1 after all have
// arrived; if some rank has not within a few seconds (it did not fail alike),
// this rank falls back to comm_abort.
[[noreturn]] void comm_abort_collective(const std::string& message);

}  // namespace llm
