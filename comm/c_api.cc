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

// The message of this thread's last failed call that has no communicator to hold it (braidGetUniqueId,
// braidCommInit*): braidGetLastError(NULL) returns it, as ncclGetLastError(NULL) does.
thread_local std::string t_last_error;

/// Records `message` as this thread's last error (logged as a warning too) and returns `result`.
braidResult_t failInit(braidResult_t result, const std::string& message) {
  BRAID_LOG(kWarn, "{}", message);
  t_last_error = message;
  return result;
}

braidResult_t failInit(const char* api, const braid::Status& status) {
  return failInit(toResult(status), std::string(api) + ": " + status.message());
}

/// braidCommInitRank as called by `api` (whose name starts the error message).
braidResult_t initRank(const char* api, braidComm_t* comm, int nranks, const braidUniqueId& id, int rank) {
  if (comm == nullptr) return failInit(braidInvalidArgument, std::string(api) + ": comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return failInit(braidInvalidArgument, std::string(api) + ": rank " + std::to_string(rank) + " of " +
                                              std::to_string(nranks) +
                                              " ranks is out of range (nranks >= 1, 0 <= rank < nranks)");
  }
  braid::UniqueId uid;
  std::memcpy(uid.internal, id.internal, sizeof(uid.internal));
  braid::Result<std::unique_ptr<braid::Communicator>> created = braid::Communicator::create(uid, rank, nranks);
  if (!created.isOk()) return failInit(api, created.status());
  *comm = new braidComm{std::move(created).value(), ""};
  return braidSuccess;
}

}  // namespace

extern "C" {

braidResult_t braidGetVersion(int* version) {
  if (version == nullptr) return braidInvalidArgument;
  // BRAID_VERSION_*: the project version (CMakeLists.txt project(braid VERSION ...)), set by comm/CMakeLists.txt.
  *version = BRAID_VERSION_MAJOR * 10000 + BRAID_VERSION_MINOR * 100 + BRAID_VERSION_PATCH;
  return braidSuccess;
}

braidResult_t braidGetUniqueId(braidUniqueId* id) {
  if (id == nullptr) return failInit(braidInvalidArgument, "braidGetUniqueId: id is NULL");
  braid::Result<braid::UniqueId> created = braid::createUniqueId();
  if (!created.isOk()) return failInit("braidGetUniqueId", created.status());
  std::memcpy(id->internal, created->internal, sizeof(id->internal));
  return braidSuccess;
}

braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId id, int rank) {
  return initRank("braidCommInitRank", comm, nranks, id, rank);
}

braidResult_t braidCommInitAll(braidComm_t* comms, int nranks, const int* /*devlist*/) {
  if (comms == nullptr) return failInit(braidInvalidArgument, "braidCommInitAll: comms is NULL");
  if (nranks < 1) {
    return failInit(braidInvalidArgument,
                    "braidCommInitAll: nranks " + std::to_string(nranks) + " is not a positive number of ranks");
  }
  braidUniqueId id;
  braidResult_t result = braidGetUniqueId(&id);
  if (result != braidSuccess) {
    t_last_error = "braidCommInitAll: " + t_last_error;
    return result;
  }
  std::vector<braidResult_t> results(nranks, braidSuccess);
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  threads.reserve(nranks);
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      results[r] = initRank("braidCommInitAll", &comms[r], nranks, id, r);
      errors[r] = t_last_error;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) {
    if (results[r] != braidSuccess) {
      for (int q = 0; q < nranks; ++q) {
        if (comms[q] != nullptr) braidCommAbort(comms[q]);
        comms[q] = nullptr;
      }
      t_last_error = errors[r];  // the first failing rank's message, on the calling thread
      return results[r];
    }
  }
  return braidSuccess;
}

braidResult_t braidCommInitEnv(braidComm_t* comm) {
  if (comm == nullptr) return failInit(braidInvalidArgument, "braidCommInitEnv: comm is NULL");
  *comm = nullptr;
  braid::Result<std::unique_ptr<braid::Bootstrap>> bootstrap = braid::bootstrapFromEnvironment();
  if (!bootstrap.isOk()) return failInit("braidCommInitEnv", bootstrap.status());
  braid::Result<std::unique_ptr<braid::Communicator>> created =
      braid::Communicator::create(std::move(bootstrap).value());
  if (!created.isOk()) return failInit("braidCommInitEnv", created.status());
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

const char* braidGetLastError(braidComm_t comm) {
  return comm == nullptr ? t_last_error.c_str() : comm->last_error.c_str();
}

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
