// Group over NCCL communicators on this process's current CUDA device: the
// same collectives and messages as the MPI group, on device buffers, for the
// CUDA backend. Compiled everywhere; the implementation is
// parallel/comm_nccl.cu in CUDA builds and parallel/comm_nccl_nocuda.cc
// (which throws) otherwise.
//
// Stream semantics (the difference from the MPI group): buffers are device
// pointers written by kernels on llm::cuda::compute_stream(). A collective
// starts on llm::cuda::gather_stream() (all-gather, broadcast) or
// reduce_stream() (reduce-scatter, all-reduce), a point-to-point message on
// p2p_stream(), each with its own NCCL communicator, once the compute stream
// has reached the call, and its CommHandle's wait() makes the compute stream
// wait for it; it does NOT block the host. So "may be used" in comm.h means:
// by work queued on the compute stream after wait() (kernels, DeviceMemory
// copies, to_host). Communication overlaps compute until the wait. One
// exception: NCCL connects a pair of members on their first message, so that
// call may block the host until the peer has made its matching call.
// Invariants: every collective and send adds the same traffic to stats() as
// on the MPI group; all_reduce_sum and barrier are blocking host calls; groups
// are created and destroyed in the same order on every member.
#pragma once

#include <memory>

#include "parallel/comm.h"

namespace llm {

// A group over the same members as `members` (an MPI group: host buffers),
// talking NCCL on this process's current CUDA device. Collective over
// `members`. The new group keeps a host copy of `members` (for the NCCL id
// exchange, barrier and all_reduce_sum), so `members` may be destroyed first.
// Throws llm::Error in a build without CUDA/NCCL.
std::unique_ptr<Group> make_nccl_group(Group& members);

}  // namespace llm
