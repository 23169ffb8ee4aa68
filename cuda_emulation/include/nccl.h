// NCCL as the emulation build sees it: the subset of NCCL's API that
// parallel/comm_nccl.cu calls, implemented over MPI (nccl_mpi_comm.cpp for
// communicators and errors, nccl_mpi_ops.cpp for collectives and messages).
// Only what the project calls is declared: a call to anything else fails to
// compile, so a new NCCL call is a conscious addition to the emulation.
// Invariant: names, signatures and enum values are NCCL 2.x's, so the
// project's code compiles unchanged; every call returns ncclSuccess or the
// error NCCL returns for that misuse, with ncclGetLastError saying why.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstddef>

#define NCCL_UNIQUE_ID_BYTES 128

enum ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,  // the emulated device has failed (the sticky error)
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclInProgress = 7,  // a non-blocking communicator's creation is under way
};

enum ncclDataType_t {
  ncclFloat32 = 7,
  ncclBfloat16 = 9,
};

enum ncclRedOp_t {
  ncclSum = 0,
};

// Opaque bytes, copied between processes as they are.
struct ncclUniqueId {
  char internal[NCCL_UNIQUE_ID_BYTES];
};

struct ncclComm;  // nccl_mpi.h: an MPI communicator over the members
using ncclComm_t = ncclComm*;

// A communicator's configuration: of NCCL's fields, the ones before
// `blocking` and `blocking` itself (0: calls return at once, and the
// creation is polled with ncclCommGetAsyncError).
#define NCCL_CONFIG_UNDEF_INT INT_MIN
struct ncclConfig_t {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
};
#define NCCL_CONFIG_INITIALIZER \
  { sizeof(ncclConfig_t), 0xcafebeef, 0, NCCL_CONFIG_UNDEF_INT }

const char* ncclGetErrorString(ncclResult_t result);
// This thread's message from its last failed call, or "" (comm is unused).
const char* ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank);
// With config->blocking = 0, returns ncclInProgress at once with *comm set,
// and makes the communicator on a thread of its own; the emulation's
// collectives and messages never return ncclInProgress.
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank,
                                    ncclConfig_t* config);
// The communicator's state: ncclInProgress while it is being made, then
// ncclSuccess or the creation's error (whose message ncclGetLastError then
// gives on this thread).
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
