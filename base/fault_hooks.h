// The test hooks of docs/testing.md, read from the environment: a fault
// aimed at one world rank, "R:N" (rank R, a number N). Only the stalled-rank,
// straggler, kill-during-save, save-fallback and supervised NCCL-error tests
// set them; unset, every hook is off.
//   LLM_FAULT_SKIP_ALL_REDUCE_SUM=R:N  rank R skips its N-th all_reduce_sum
//                                      (parallel/comm_mpi.cpp)
//   LLM_FAULT_SHORT_ALL_REDUCE=R:N     rank R's N-th all-reduce over NCCL is
//                                      one element short (parallel/comm_nccl.cu)
//   LLM_FAULT_NCCL_ERROR=R:N           rank R's N-th call on an NCCL
//                                      communicator returns ncclSystemError
//                                      (parallel/comm_nccl.cu)
//   LLM_FAULT_SLOW_STEP_MS=R:MS        rank R computes MS ms longer each step
//                                      (trainer/trainer.cpp)
//   LLM_FAULT_STALL_SAVE=R:S           rank R's background write of step S's
//                                      checkpoint sleeps an hour first
//                                      (persistence/background_save.cpp)
//   LLM_FAULT_HOST_MEMORY_FREE=R:BYTES rank R sees BYTES of host memory free
//                                      when it sizes a background save's
//                                      copy (trainer/trainer.cpp)
#pragma once

#include <cstdint>

namespace llm {

struct RankFault {
  int rank = -1;  // -1: off (unset or not "R:N")
  int64_t value = 0;
};

// The hook named `variable`, read now (callers keep it in a static).
RankFault rank_fault_from_env(const char* variable);

}  // namespace llm
