// The net plugin's one implementation, in ncclNet_v11_t's shape (nccl_plugins.md §1.3; the call order of
// §1.3 "Call order"): net/exports.cc points ncclNetPlugin_v11 at these and adapts the older tables to them.
// Every function returns an ncclResult_t, catches every exception (common/plugin_log.h guarded()) and logs its
// errors through NCCL's logger:
//   ncclInvalidArgument  a NULL or foreign pointer, an index or count out of range;
//   ncclInvalidUsage     bad configuration (BRAID_NET_IF / NCCL_SOCKET_IFNAME matching nothing, BRAID_NET_*
//                        out of range, BRAID_NET_TRANSPORT=ucx in a build without UCX, ranks that disagree on
//                        BRAID_NET_TRANSPORT), CUDA or DMA-BUF memory (host memory only), a truncated message;
//   ncclSystemError      socket and UCX failures, a peer that disappeared, a connection not up within BRAID_TIMEOUT.
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi/net_abi.h"

namespace braid::nccl_plugin {

/// The name NCCL matches against NCCL_NET (case-insensitive).
inline constexpr const char* kNetPluginName = "Braid";

/// init (v11): one context per communicator; reads BRAID_NET_IF (or NCCL_SOCKET_IFNAME), BRAID_NET_TRANSPORT,
/// BRAID_NET_NSOCKS, BRAID_NET_NTHREADS, BRAID_TIMEOUT and BRAID_NET_IDLE_TIMEOUT; with UCX it takes the process's
/// ucp context. Fails (NCCL then falls back to its internal plugins) when no device is usable, a variable is
/// invalid, BRAID_NET_TRANSPORT=ucx in a build without UCX (ncclInvalidUsage) or ucp_init fails (ncclSystemError).
int netInit(void** ctx, uint64_t comm_id, nccl_abi::NetCommConfig* config, nccl_abi::Logger logger,
            nccl_abi::ProfilerCallback profiler);
/// init of tables <= v10: one process-wide context that listen / connect of those versions use.
int netInitLegacy(nccl_abi::Logger logger);
/// The context of the tables <= v10 (nullptr before netInitLegacy).
void* netLegacyContext();
int netDevices(int* ndev);
int netGetProperties(int dev, nccl_abi::NetPropertiesV11* props);
int netListen(void* ctx, int dev, void* handle, void** listen_comm);
int netConnect(void* ctx, int dev, void* handle, void** send_comm, nccl_abi::NetDeviceHandle** send_dev_comm);
int netAccept(void* listen_comm, void** recv_comm, nccl_abi::NetDeviceHandle** recv_dev_comm);
/// Host memory only: type CUDA / DMA-BUF is ncclInvalidUsage.
int netRegMr(void* comm, void* data, size_t size, int type, void** mhandle);
/// Always ncclInvalidUsage (ptrSupport has no DMA-BUF bit; NCCL does not call it).
int netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
int netDeregMr(void* comm, void* mhandle);
int netIsend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
/// `*request` may hold NCCL_NET_OPTIONAL_RECV_COMPLETION on entry: the receive then still returns a real request
/// (it completes when the data is in place, which the convention allows).
int netIrecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
             void** request);
/// Host memory needs no flush: a request that test() reports done at once.
int netIflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
int netTest(void* request, int* done, int* sizes);
int netCloseSend(void* send_comm);
int netCloseRecv(void* recv_comm);
int netCloseListen(void* listen_comm);
int netFinalize(void* ctx);
/// Stores the hints in the context and logs them at TRACE; they change nothing over TCP or UCX.
int netSetNetAttr(void* ctx, nccl_abi::NetAttrV11* attr);

}  // namespace braid::nccl_plugin
