/* Braid's C API, in the shape of NCCL's (nccl.h 2.28): communicators from a unique id, blocking collectives on
 * CPU memory. Types and values line up with NCCL's (braidDataType_t == ncclDataType_t values, braidRedOp_t ==
 * ncclRedOp_t for the built-in ops, braidResult_t == ncclResult_t), so code written against NCCL ports by
 * renaming. `stream` parameters keep NCCL's argument order; the CPU runtime requires NULL (CUDA builds later
 * take a cudaStream_t).
 *
 * Errors are returned, never raised: braidGetErrorString(code) names the code and braidGetLastError(comm)
 * gives the message of the last failure (which rank, peer, buffer or file). */
#ifndef BRAID_BRAID_H_
#define BRAID_BRAID_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRAID_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[BRAID_UNIQUE_ID_BYTES];
} braidUniqueId;

typedef struct braidComm* braidComm_t;

typedef enum {
  braidSuccess = 0,
  braidUnhandledCudaError = 1,
  braidSystemError = 2,
  braidInternalError = 3,
  braidInvalidArgument = 4,
  braidInvalidUsage = 5,
  braidRemoteError = 6,
  braidInProgress = 7,
  braidNumResults = 8
} braidResult_t;

typedef enum {
  braidInt8 = 0,
  braidChar = 0,
  braidUint8 = 1,
  braidInt32 = 2,
  braidInt = 2,
  braidUint32 = 3,
  braidInt64 = 4,
  braidUint64 = 5,
  braidFloat16 = 6,
  braidHalf = 6,
  braidFloat32 = 7,
  braidFloat = 7,
  braidFloat64 = 8,
  braidDouble = 8,
  braidBfloat16 = 9,
  braidNumTypes = 10
} braidDataType_t;

typedef enum { braidSum = 0, braidProd = 1, braidMax = 2, braidMin = 3, braidAvg = 4, braidNumOps = 5 } braidRedOp_t;

/* Library version as NCCL's: major*10000 + minor*100 + patch. */
braidResult_t braidGetVersion(int* version);
/* Starts a bootstrap root in this process and writes its address into *id (call on one rank, share the id). */
braidResult_t braidGetUniqueId(braidUniqueId* id);
/* Collective: every rank 0..nranks-1 calls it with the same id (from its own thread or process). */
braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId id, int rank);
/* nranks communicators in this process (threads transport), as ncclCommInitAll; each is then driven from its
 * own thread. devlist is ignored by the CPU runtime and may be NULL. */
braidResult_t braidCommInitAll(braidComm_t* comms, int nranks, const int* devlist);
/* Environment-driven init: BRAID_RANK, BRAID_WORLD_SIZE, BRAID_ROOT, or MPI's rank and size under mpirun. */
braidResult_t braidCommInitEnv(braidComm_t* comm);
braidResult_t braidCommDestroy(braidComm_t comm);
/* Tells the peers this rank failed; their pending and later calls return braidRemoteError. Frees comm. */
braidResult_t braidCommAbort(braidComm_t comm);
braidResult_t braidCommCount(const braidComm_t comm, int* count);
braidResult_t braidCommUserRank(const braidComm_t comm, int* rank);

const char* braidGetErrorString(braidResult_t result);
/* The message of the last error of comm ("" when none); valid until the next call on comm. comm == NULL: the
 * message of this thread's last failed braidGetUniqueId / braidCommInitRank / braidCommInitAll / braidCommInitEnv
 * (which has no communicator to hold it; "" when none failed), valid until this thread's next failed one. */
const char* braidGetLastError(braidComm_t comm);

braidResult_t braidAllReduce(const void* sendbuff, void* recvbuff, size_t count, braidDataType_t datatype,
                             braidRedOp_t op, braidComm_t comm, void* stream);
braidResult_t braidAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, braidDataType_t datatype,
                             braidComm_t comm, void* stream);
braidResult_t braidReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, braidDataType_t datatype,
                                 braidRedOp_t op, braidComm_t comm, void* stream);
/* count elements to every peer (NCCL 2.28's ncclAlltoAll shape). */
braidResult_t braidAllToAll(const void* sendbuff, void* recvbuff, size_t count, braidDataType_t datatype,
                            braidComm_t comm, void* stream);
/* MPI_Alltoallv's shape: counts and displacements in elements, one per rank. */
braidResult_t braidAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                             const size_t recvcounts[], const size_t rdispls[], braidDataType_t datatype,
                             braidComm_t comm, void* stream);
braidResult_t braidBroadcast(const void* sendbuff, void* recvbuff, size_t count, braidDataType_t datatype, int root,
                             braidComm_t comm, void* stream);
braidResult_t braidReduce(const void* sendbuff, void* recvbuff, size_t count, braidDataType_t datatype, braidRedOp_t op,
                          int root, braidComm_t comm, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_BRAID_H_ */
