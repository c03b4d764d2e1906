// The C API (include/braid/braid.h) over braid::Communicator.
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "braid/comm.h"
#include "c_api_internal.h"
#include "common/log.h"

namespace {

using braid::capi::badEnum;
using braid::capi::checkCall;
using braid::capi::record;
using braid::capi::toResult;
using braid::capi::validType;

static_assert(sizeof(braidUniqueId) == sizeof(braid::UniqueId), "unique id layouts differ");
static_assert(static_cast<int>(braid::DataType::kBfloat16) == braidBfloat16, "datatype values differ");
static_assert(static_cast<int>(braid::ReduceOp::kAvg) == braidAvg, "op values differ");

bool validOp(braidRedOp_t op) { return op >= 0 && op < braidNumOps; }

}  // namespace

extern "C" {

braidResult_t braidGetVersion(int* version) {
  if (version == nullptr) return braidInvalidArgument;
  // BRAID_VERSION_*: the project version (CMakeLists.txt project(braid VERSION ...)), set by comm/CMakeLists.txt.
  *version = BRAID_VERSION_MAJOR * 10000 + BRAID_VERSION_MINOR * 100 + BRAID_VERSION_PATCH;
  return braidSuccess;
}

braidResult_t braidGetUniqueId(braidUniqueId* id) {
  if (id == nullptr) return braidInvalidArgument;
  braid::Result<braid::UniqueId> created = braid::createUniqueId();
  if (!created.isOk()) {
    BRAID_LOG(kWarn, "braidGetUniqueId: {}", created.status().message());
    return toResult(created.status());
  }
  std::memcpy(id->internal, created->internal, sizeof(id->internal));
  return braidSuccess;
}

braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId id, int rank) {
  if (comm == nullptr || nranks < 1 || rank < 0 || rank >= nranks) return braidInvalidArgument;
  *comm = nullptr;
  braid::UniqueId uid;
  std::memcpy(uid.internal, id.internal, sizeof(uid.internal));
  braid::Result<std::unique_ptr<braid::Communicator>> created = braid::Communicator::create(uid, rank, nranks);
  if (!created.isOk()) {
    BRAID_LOG_RANK(kWarn, rank, "braidCommInitRank: {}", created.status().message());
    return toResult(created.status());
  }
  *comm = new braidComm{std::move(created).value(), ""};
  return braidSuccess;
}

braidResult_t braidCommInitAll(braidComm_t* comms, int nranks, const int* /*devlist*/) {
  if (comms == nullptr || nranks < 1) return braidInvalidArgument;
  braidUniqueId id;
  braidResult_t result = braidGetUniqueId(&id);
  if (result != braidSuccess) return result;
  std::vector<braidResult_t> results(nranks, braidSuccess);
  std::vector<std::thread> threads;
  threads.reserve(nranks);
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] { results[r] = braidCommInitRank(&comms[r], nranks, id, r); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) {
    if (results[r] != braidSuccess) {
      for (int q = 0; q < nranks; ++q) {
        if (comms[q] != nullptr) braidCommAbort(comms[q]);
        comms[q] = nullptr;
      }
      return results[r];
    }
  }
  return braidSuccess;
}

braidResult_t braidCommInitEnv(braidComm_t* comm) {
  if (comm == nullptr) return braidInvalidArgument;
  *comm = nullptr;
  braid::Result<std::unique_ptr<braid::Bootstrap>> bootstrap = braid::bootstrapFromEnvironment();
  if (!bootstrap.isOk()) {
    BRAID_LOG(kWarn, "braidCommInitEnv: {}", bootstrap.status().message());
    return toResult(bootstrap.status());
  }
  braid::Result<std::unique_ptr<braid::Communicator>> created =
      braid::Communicator::create(std::move(bootstrap).value());
  if (!created.isOk()) {
    BRAID_LOG(kWarn, "braidCommInitEnv: {}", created.status().message());
    return toResult(created.status());
  }
  *comm = new braidComm{std::move(created).value(), ""};
  return braidSuccess;
}

braidResult_t braidCommDestroy(braidComm_t comm) {
  if (comm == nullptr) return braidInvalidArgument;
  delete comm;
  return braidSuccess;
}

braidResult_t braidCommAbort(braidComm_t comm) {
  if (comm == nullptr) return braidInvalidArgument;
  if (comm->impl) comm->impl->abort("braidCommAbort");
  delete comm;
  return braidSuccess;
}

braidResult_t braidCommCount(const braidComm_t comm, int* count) {
  if (comm == nullptr || !comm->impl || count == nullptr) return braidInvalidArgument;
  *count = comm->impl->size();
  return braidSuccess;
}

braidResult_t braidCommUserRank(const braidComm_t comm, int* rank) {
  if (comm == nullptr || !comm->impl || rank == nullptr) return braidInvalidArgument;
  *rank = comm->impl->rank();
  return braidSuccess;
}

const char* braidGetErrorString(braidResult_t result) {
  switch (result) {
    case braidSuccess: return "no error";
    case braidUnhandledCudaError: return "unhandled cuda error";
    case braidSystemError: return "unhandled system error (a socket, shared memory or thread call failed)";
    case braidInternalError: return "internal error - please report this issue to the Braid developers";
    case braidInvalidArgument: return "invalid argument";
    case braidInvalidUsage: return "invalid usage";
    case braidRemoteError: return "remote process exited or there was a network error";
    case braidInProgress: return "Braid operation in progress";
    default: return "unknown result code";
  }
}

const char* braidGetLastError(braidComm_t comm) { return comm == nullptr ? "" : comm->last_error.c_str(); }

braidResult_t braidAllReduce(const void* sendbuff, void* recvbuff, size_t count, braidDataType_t datatype,
                             braidRedOp_t op, braidComm_t comm, void* stream) {
  if (braidResult_t r = checkCall(comm, stream); r != braidSuccess) return r;
  if (!validType(datatype)) return badEnum(comm, "datatype", datatype);
  if (!validOp(op)) return badEnum(comm, "op", op);
  return record(comm, comm->impl->allReduce(sendbuff, recvbuff, count, static_cast<braid::DataType>(datatype),
                                            static_cast<braid::ReduceOp>(op)));
}

braidResult_t braidAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, braidDataType_t datatype,
                             braidComm_t comm, void* stream) {
  if (braidResult_t r = checkCall(comm, stream); r != braidSuccess) return r;
  if (!validType(datatype)) return badEnum(comm, "datatype", datatype);
  return record(comm, comm->impl->allGather(sendbuff, recvbuff, sendcount, static_cast<braid::DataType>(datatype)));
}

braidResult_t braidReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, braidDataType_t datatype,
                                 braidRedOp_t op, braidComm_t comm, void* stream) {
  if (braidResult_t r = checkCall(comm, stream); r != braidSuccess) return r;
  if (!validType(datatype)) return badEnum(comm, "datatype", datatype);
  if (!validOp(op)) return badEnum(comm, "op", op);
  return record(comm, comm->impl->reduceScatter(sendbuff, recvbuff, recvcount, static_cast<braid::DataType>(datatype),
                                                static_cast<braid::ReduceOp>(op)));
}

braidResult_t braidAllToAll(const void* sendbuff, void* recvbuff, size_t count, braidDataType_t datatype,
                            braidComm_t comm, void* stream) {
  if (braidResult_t r = checkCall(comm, stream); r != braidSuccess) return r;
  if (!validType(datatype)) return badEnum(comm, "datatype", datatype);
  return record(comm, comm->impl->allToAll(sendbuff, recvbuff, count, static_cast<braid::DataType>(datatype)));
}

braidResult_t braidAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                             const size_t recvcounts[], const size_t rdispls[], braidDataType_t datatype,
                             braidComm_t comm, void* stream) {
  if (braidResult_t r = checkCall(comm, stream); r != braidSuccess) return r;
  if (!validType(datatype)) return badEnum(comm, "datatype", datatype);
  return record(comm, comm->impl->allToAllv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls,
                                            static_cast<braid::DataType>(datatype)));
}

braidResult_t braidBroadcast(const void* sendbuff, void* recvbuff, size_t count, braidDataType_t datatype, int root,
                             braidComm_t comm, void* stream) {
  if (braidResult_t r = checkCall(comm, stream); r != braidSuccess) return r;
  if (!validType(datatype)) return badEnum(comm, "datatype", datatype);
  return record(comm, comm->impl->broadcast(sendbuff, recvbuff, count, static_cast<braid::DataType>(datatype), root));
}

braidResult_t braidReduce(const void* sendbuff, void* recvbuff, size_t count, braidDataType_t datatype, braidRedOp_t op,
                          int root, braidComm_t comm, void* stream) {
  if (braidResult_t r = checkCall(comm, stream); r != braidSuccess) return r;
  if (!validType(datatype)) return badEnum(comm, "datatype", datatype);
  if (!validOp(op)) return badEnum(comm, "op", op);
  return record(comm, comm->impl->reduce(sendbuff, recvbuff, count, static_cast<braid::DataType>(datatype),
                                         static_cast<braid::ReduceOp>(op), root));
}

}  // extern "C"
