// A stand-in for the CUDA runtime and NCCL, preloaded (LD_PRELOAD) into braid_nccl_ranks by
// tests/device/nccl_ranks_test.sh so that the driver's launcher, rank processes, checks and table run on a machine
// without a GPU, and behind the NCCL-API shim by tests/nccl/shim_pareto_fake_test.sh (the shim's setup up to the GPU
// executor: the id broadcast, the bootstrap, the Pareto set's exchange). "Device" memory is host memory; a
// communicator's ranks exchange each collective's contributions as files in FAKE_NCCL_DIR (one file per rank and
// call, renamed into place when complete; a rank waits until all it needs exist). Collectives compute what NCCL's
// do: all-reduce float sum, all-gather, broadcast, grouped send/recv; the communicator queries answer rank, size and
// device 0; a communicator created inside ncclGroupStart/ncclGroupEnd answers no query until the group ends (as
// NCCL's).
//
// Test knobs: FAKE_GPU_COUNT (default 1) is what cudaGetDeviceCount reports; FAKE_NCCL_CORRUPT=1 makes rank 1 write
// one wrong element into each all-reduce result; FAKE_NCCL_HANG_RANK=r makes rank r wait forever in
// ncclCommInitRank; ncclCommInitRank fails (ncclInvalidUsage) unless NCCL_HOSTID ends in "-<rank>", the driver's
// promise that every rank is its own host, or FAKE_NCCL_ANY_HOST=1 (one process holding several ranks).
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Message {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;
  int peer = 0;
};

struct Group {
  int depth = 0;
  ncclComm_t comm = nullptr;
  std::vector<Message> sends, recvs;
  std::vector<ncclComm_t> created;  // communicators created in the group: initialised at its ncclGroupEnd
};
Group g_group;

std::string dirOf() {
  const char* dir = std::getenv("FAKE_NCCL_DIR");
  return dir != nullptr ? dir : "/tmp";
}

bool writeFile(const std::string& path, const void* data, size_t bytes) {
  const std::string tmp = path + ".part";
  std::ofstream out(tmp, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  return out.good() && std::rename(tmp.c_str(), path.c_str()) == 0;
}

/// Waits (at most 60 s) for `path`, then reads `bytes` of it into `data`.
bool readFile(const std::string& path, void* data, size_t bytes) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::ifstream in(path, std::ios::binary);
  in.read(static_cast<char*>(data), static_cast<std::streamsize>(bytes));
  return in.gcount() == static_cast<std::streamsize>(bytes);
}

}  // namespace

struct ncclComm {
  int n = 0;
  int rank = 0;
  std::string prefix;  // FAKE_NCCL_DIR/<id>
  long seq = 0;
  bool ready = true;  // false from an ncclCommInitRank inside a group until its ncclGroupEnd, as NCCL's
};

extern "C" {

// ---- CUDA runtime ------------------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count) {
  const char* n = std::getenv("FAKE_GPU_COUNT");
  *count = n != nullptr ? std::atoi(n) : 1;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int) {
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "fake GPU");
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = reinterpret_cast<cudaStream_t>(0x1);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::malloc(bytes);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t) {
  std::memcpy(dst, src, bytes);  // streams run nothing later: a copy is done when enqueued
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
const char* cudaGetErrorName(cudaError_t) { return "fakeCudaError"; }
const char* cudaGetErrorString(cudaError_t) { return "fake CUDA error"; }

// ---- NCCL --------------------------------------------------------------------------------------------------
ncclResult_t ncclGetVersion(int* version) {
  *version = 99999;
  return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof(*id));
  static int made = 0;  // every id of a process differs, as NCCL's do
  std::snprintf(id->internal, sizeof(id->internal), "fake-%d-%d", static_cast<int>(getpid()), made++);
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t) { return "fake NCCL error"; }
const char* ncclGetLastError(ncclComm_t) { return "fake NCCL last error"; }
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int n, ncclUniqueId id, int rank) {
  const char* host = std::getenv("NCCL_HOSTID");
  const std::string want = "-" + std::to_string(rank);
  const char* any_host = std::getenv("FAKE_NCCL_ANY_HOST");
  if (any_host != nullptr && std::strcmp(any_host, "1") == 0) {
    // One process may hold several ranks (the shim's group test): no host id check.
  } else if (host == nullptr || std::string(host).size() < want.size() ||
             std::string(host).compare(std::string(host).size() - want.size(), want.size(), want) != 0) {
    return ncclInvalidUsage;
  }
  const char* hang = std::getenv("FAKE_NCCL_HANG_RANK");
  if (hang != nullptr && std::atoi(hang) == rank) {
    for (;;) pause();  // a rank that never joins: the launcher's --timeout must end the run
  }
  *comm = new ncclComm{n, rank, dirOf() + "/" + std::string(id.internal), 0, g_group.depth == 0};
  if (g_group.depth > 0) g_group.created.push_back(*comm);
  return ncclSuccess;
}
// As NCCL 2.28's ncclCommEnsureReady: a communicator whose initialisation has not run (created inside a group that
// has not ended) answers no query.
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!comm->ready) return ncclInvalidUsage;
  *rank = comm->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!comm->ready) return ncclInvalidUsage;
  *count = comm->n;
  return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (!comm->ready) return ncclInvalidUsage;
  *device = 0;
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* result) {
  *result = ncclSuccess;
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t) {
  if (type != ncclFloat32 || op != ncclSum) return ncclInvalidArgument;
  const long seq = comm->seq++;
  const size_t bytes = count * sizeof(float);
  const std::string base = comm->prefix + "." + std::to_string(seq) + ".";
  if (!writeFile(base + std::to_string(comm->rank), send, bytes)) return ncclSystemError;
  std::vector<float> sum(count, 0.0f), part(count);
  for (int r = 0; r < comm->n; ++r) {
    if (!readFile(base + std::to_string(r), part.data(), bytes)) return ncclSystemError;
    for (size_t i = 0; i < count; ++i) sum[i] += part[i];
  }
  const char* corrupt = std::getenv("FAKE_NCCL_CORRUPT");
  if (corrupt != nullptr && std::strcmp(corrupt, "1") == 0 && comm->rank == 1 && count > 0) sum[count / 2] += 1;
  std::memcpy(recv, sum.data(), bytes);
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t) {
  if (type != ncclFloat32) return ncclInvalidArgument;
  const long seq = comm->seq++;
  const size_t bytes = count * sizeof(float);
  const std::string base = comm->prefix + "." + std::to_string(seq) + ".";
  if (!writeFile(base + std::to_string(comm->rank), send, bytes)) return ncclSystemError;
  for (int r = 0; r < comm->n; ++r) {
    if (!readFile(base + std::to_string(r), static_cast<char*>(recv) + r * bytes, bytes)) return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t) {
  size_t element = 0;
  switch (type) {
    case ncclInt8:
    case ncclUint8: element = 1; break;
    case ncclFloat32:
    case ncclInt32:
    case ncclUint32: element = 4; break;
    default: return ncclInvalidArgument;
  }
  if (root < 0 || root >= comm->n) return ncclInvalidArgument;
  const long seq = comm->seq++;
  const size_t bytes = count * element;
  const std::string file = comm->prefix + "." + std::to_string(seq) + ".root";
  if (comm->rank == root) {
    if (!writeFile(file, send, bytes)) return ncclSystemError;
    if (recv != send) std::memmove(recv, send, bytes);
    return ncclSuccess;
  }
  return readFile(file, recv, bytes) ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclGroupStart() {
  ++g_group.depth;
  return ncclSuccess;
}
ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
  if (g_group.depth == 0 || type != ncclFloat32) return ncclInvalidUsage;
  g_group.comm = comm;
  g_group.sends.push_back({send, nullptr, count * sizeof(float), peer});
  return ncclSuccess;
}
ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
  if (g_group.depth == 0 || type != ncclFloat32) return ncclInvalidUsage;
  g_group.comm = comm;
  g_group.recvs.push_back({nullptr, recv, count * sizeof(float), peer});
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (g_group.depth == 0) return ncclInvalidUsage;
  if (--g_group.depth > 0) return ncclSuccess;
  for (ncclComm_t created : g_group.created) created->ready = true;
  ncclComm_t comm = g_group.comm;
  ncclResult_t result = ncclSuccess;
  if (comm != nullptr) {
    const long seq = comm->seq++;
    const std::string base = comm->prefix + "." + std::to_string(seq) + ".";
    for (const Message& m : g_group.sends) {
      if (!writeFile(base + std::to_string(comm->rank) + "-" + std::to_string(m.peer), m.send, m.bytes))
        result = ncclSystemError;
    }
    for (const Message& m : g_group.recvs) {
      if (!readFile(base + std::to_string(m.peer) + "-" + std::to_string(comm->rank), m.recv, m.bytes))
        result = ncclSystemError;
    }
  }
  g_group = Group{};
  return result;
}

}  // extern "C"
