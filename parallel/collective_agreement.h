// Whether the members of every group issued the same collectives. NCCL does
// not compare sizes: on an H100 (2026-11-27) an all-reduce one element short
// on one of two ranks completed, and training went on with that gradient
// wrong. MPI checks only some mismatches. Each group keeps a fingerprint of
// its collectives (collectives/watchdog.h's GroupTrace); the trainer compares
// them once a step, before the optimizer's update, so a mismatch ends the job
// before it reaches the weights. docs/failure.md says what the check costs.
#pragma once

#include <string>

#include "collectives/group.h"

namespace llm {

// "" when the members of each of this process's groups of several members
// issued the same collectives since the last call; otherwise a message naming
// the group, its first collective the members issued differently and each
// member's version of it. Collective over `world` (an MPI group: host
// buffers), with the same verdict and message on every rank. The collectives
// compared are marked checked when all groups agree.
std::string collective_disagreement(Group& world);

// Ends the job on a disagreement: every rank writes its flight recorder, and
// rank 0 prints the message (comm_abort_collective).
void check_collective_agreement(Group& world);

}  // namespace llm
