#include "net/plugin.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "common/env.h"
#include "common/plugin_log.h"
#include "net/comm.h"
#include "net/connect.h"
#include "net/devices.h"
#include "net/ucx_path.h"

namespace braid::nccl_plugin {
namespace {

using nccl_abi::kSubsysNet;

// What init returns: one per communicator (v11) or the process-wide one of older tables.
struct NetContext {
  ObjectKind kind = ObjectKind::kContext;
  uint64_t comm_id = 0;
  int traffic_class = nccl_abi::kNetTrafficClassUndef;
  ConnectionOptions options;
  nccl_abi::NetAttrV11 attr{};
};

std::mutex g_legacy_mutex;
NetContext* g_legacy = nullptr;

int fail(const Status& status, const char* what) { return report(status, kSubsysNet, what); }
Status invalid(const std::string& text) { return Status(StatusCode::kInvalidArgument, text); }

// Whether this kernel lets a socket use TCP congestion control `name` (a throwaway socket tries it).
Status checkTcpCongestion(const std::string& name) {
  net::Fd probe(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return Status(StatusCode::kSystemError, "NET/Braid: socket(): " + net::errnoText(errno));
  if (setsockopt(probe.get(), IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) != 0) {
    return Status(StatusCode::kInvalidUsage,
                  fmt::format("NET/Braid: BRAID_TCP_CONGESTION='{}': {} (net.ipv4.tcp_available_congestion_control "
                              "lists what this kernel has; without CAP_NET_ADMIN only the names in "
                              "net.ipv4.tcp_allowed_congestion_control)",
                              name, net::errnoText(errno)));
  }
  return Status::ok();
}

// BRAID_NET_TRANSPORT / BRAID_NET_NSOCKS / BRAID_NET_NTHREADS / BRAID_TIMEOUT / BRAID_NET_IDLE_TIMEOUT.
Result<ConnectionOptions> readOptions() {
  ConnectionOptions options;
  BRAID_ASSIGN_OR_RETURN(options.transport, parseNetTransport(envString("BRAID_NET_TRANSPORT")));
  // A value that is no integer is a configuration error like one out of range: ncclInvalidUsage for both.
  Result<int64_t> nsocks_read = envInt("BRAID_NET_NSOCKS");
  Result<int64_t> nthreads_read = envInt("BRAID_NET_NTHREADS");
  for (const Result<int64_t>* r : {&nsocks_read, &nthreads_read}) {
    if (!r->isOk()) return Status(StatusCode::kInvalidUsage, "NET/Braid: " + r->status().message());
  }
  const int64_t nsocks = *nsocks_read;
  const int64_t nthreads = *nthreads_read;
  if (nthreads < 1 || nthreads > kMaxThreadsPerComm || nsocks < 1 || nsocks * nthreads > kMaxSocketsPerComm) {
    return Status(StatusCode::kInvalidUsage,
                  fmt::format("NET/Braid: BRAID_NET_NTHREADS={} BRAID_NET_NSOCKS={}: need 1..{} threads, at least "
                              "1 socket per thread and threads x sockets per thread <= {}",
                              nthreads, nsocks, kMaxThreadsPerComm, kMaxSocketsPerComm));
  }
  options.nthreads = static_cast<int>(nthreads);
  options.nsocks = static_cast<int>(nsocks * nthreads);
  BRAID_ASSIGN_OR_RETURN(options.timeout_s, runtimeTimeoutSeconds());
  Result<double> idle = envDouble("BRAID_NET_IDLE_TIMEOUT");
  if (!idle.isOk() || !(*idle >= 0)) {
    return Status(StatusCode::kInvalidUsage,
                  fmt::format("NET/Braid: BRAID_NET_IDLE_TIMEOUT={}: not a number of seconds >= 0 (0 = never)",
                              envString("BRAID_NET_IDLE_TIMEOUT")));
  }
  options.idle_timeout_s = std::min(*idle, kMaxTimeoutSeconds);
  Result<congestion::Config> cc = congestion::Config::fromEnvironment();
  if (!cc.isOk()) return Status(StatusCode::kInvalidUsage, "NET/Braid: " + cc.status().message());
  options.cc = *cc;
  options.tcp_congestion = envString("BRAID_TCP_CONGESTION");
  if (!options.tcp_congestion.empty() && options.transport == NetTransport::kTcp) {
    BRAID_RETURN_IF_ERROR(checkTcpCongestion(options.tcp_congestion));
  }
  if (options.transport == NetTransport::kUcx) {
    BRAID_ASSIGN_OR_RETURN(options.ucx, acquireUcxContext());
  }
  return options;
}

Result<NetContext*> makeContext(uint64_t comm_id, const nccl_abi::NetCommConfig* config) {
  BRAID_ASSIGN_OR_RETURN(const std::vector<NetDevice>* devices, netDevices());
  BRAID_ASSIGN_OR_RETURN(ConnectionOptions options, readOptions());
  auto ctx = std::make_unique<NetContext>();
  ctx->comm_id = comm_id;
  ctx->traffic_class = config != nullptr ? config->trafficClass : nccl_abi::kNetTrafficClassUndef;
  ctx->options = options;
  std::memset(&ctx->attr, 0xff, sizeof(ctx->attr));
  if (options.transport == NetTransport::kUcx) {
    const char* tls = std::getenv("UCX_TLS");
    BRAID_PLUGIN_LOG(kLogInfo, kSubsysNet,
                     "NET/Braid: init comm {:#x}: {} devices, data over UCX (UCX_TLS={}), a worker per connection, "
                     "timeout {:g} s{}",
                     comm_id, devices->size(), tls != nullptr ? tls : "unset", options.timeout_s,
                     options.cc.receiverCredits() > 0 ? "; BRAID_CC_POLICY=adaptive applies to the TCP data path "
                                                        "only: UCX receivers admit every sender"
                                                      : "");
  } else {
    BRAID_PLUGIN_LOG(kLogInfo, kSubsysNet,
                     "NET/Braid: init comm {:#x}: {} devices, data over TCP: {} data sockets over {} helper threads "
                     "per connection, timeout {:g} s, congestion control {}",
                     comm_id, devices->size(), options.nsocks, options.nthreads, options.timeout_s,
                     options.cc.receiverCredits() > 0
                         ? fmt::format("adaptive (receivers admit senders: at least {}, grants of {})",
                                       options.cc.credits, congestion::byteText(options.cc.grant_bytes))
                         : std::string("fixed (every sender at once)"));
  }
  return ctx.release();
}

NetContext* asContext(void* p) {
  auto* ctx = static_cast<NetContext*>(p);
  return (ctx != nullptr && ctx->kind == ObjectKind::kContext) ? ctx : nullptr;
}

template <class T>
T* as(void* p, ObjectKind kind) {
  auto* obj = static_cast<T*>(p);
  return (obj != nullptr && obj->kind == kind) ? obj : nullptr;
}

CommBase* asComm(void* p) {
  auto* base = static_cast<CommBase*>(p);
  if (base == nullptr || (base->kind != ObjectKind::kSend && base->kind != ObjectKind::kRecv)) return nullptr;
  return base;
}

}  // namespace

int netInit(void** ctx, uint64_t comm_id, nccl_abi::NetCommConfig* config, nccl_abi::Logger logger,
            nccl_abi::ProfilerCallback) {
  return guarded(kSubsysNet, "init", [&] {
    setLogger(logger);
    if (ctx == nullptr) return fail(invalid("init: ctx is NULL"), "init");
    *ctx = nullptr;
    Result<NetContext*> made = makeContext(comm_id, config);
    if (!made.isOk()) return fail(made.status(), "init");
    *ctx = made.value();
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netInitLegacy(nccl_abi::Logger logger) {
  return guarded(kSubsysNet, "init", [&] {
    setLogger(logger);
    std::lock_guard<std::mutex> lock(g_legacy_mutex);
    if (g_legacy != nullptr) return static_cast<int>(nccl_abi::kSuccess);
    Result<NetContext*> made = makeContext(0, nullptr);
    if (!made.isOk()) return fail(made.status(), "init");
    g_legacy = made.value();
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

void* netLegacyContext() {
  std::lock_guard<std::mutex> lock(g_legacy_mutex);
  return g_legacy;
}

int netDevices(int* ndev) {
  return guarded(kSubsysNet, "devices", [&] {
    if (ndev == nullptr) return fail(invalid("devices: ndev is NULL"), "devices");
    Result<const std::vector<NetDevice>*> devices = netDevices();
    if (!devices.isOk()) return fail(devices.status(), "devices");
    *ndev = static_cast<int>(devices.value()->size());
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netGetProperties(int dev, nccl_abi::NetPropertiesV11* props) {
  return guarded(kSubsysNet, "getProperties", [&] { return fail(netProperties(dev, props), "getProperties"); });
}

int netListen(void* ctx, int dev, void* handle, void** listen_comm) {
  return guarded(kSubsysNet, "listen", [&] {
    NetContext* c = asContext(ctx);
    if (c == nullptr || listen_comm == nullptr)
      return fail(invalid("listen: bad context or NULL listenComm"), "listen");
    *listen_comm = nullptr;
    Result<std::unique_ptr<ListenComm>> made = listenOn(dev, c->options, handle);
    if (!made.isOk()) return fail(made.status(), "listen");
    *listen_comm = made.value().release();
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netConnect(void* ctx, int dev, void* handle, void** send_comm, nccl_abi::NetDeviceHandle**) {
  return guarded(kSubsysNet, "connect", [&] {
    NetContext* c = asContext(ctx);
    if (c == nullptr || send_comm == nullptr) return fail(invalid("connect: bad context or NULL sendComm"), "connect");
    *send_comm = nullptr;
    Result<const std::vector<NetDevice>*> devices = netDevices();
    if (!devices.isOk()) return fail(devices.status(), "connect");
    if (dev < 0 || dev >= static_cast<int>(devices.value()->size())) {
      return fail(invalid(fmt::format("connect: device {} out of range", dev)), "connect");
    }
    Result<std::unique_ptr<SendComm>> made = connectStep(handle, c->options);
    if (!made.isOk()) return fail(made.status(), "connect");
    *send_comm = made.value().release();  // nullptr while in progress
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netAccept(void* listen_comm, void** recv_comm, nccl_abi::NetDeviceHandle**) {
  return guarded(kSubsysNet, "accept", [&] {
    auto* listen = as<ListenComm>(listen_comm, ObjectKind::kListen);
    if (listen == nullptr || recv_comm == nullptr)
      return fail(invalid("accept: bad listenComm or NULL recvComm"), "accept");
    *recv_comm = nullptr;
    Result<std::unique_ptr<RecvComm>> made = acceptStep(listen);
    if (!made.isOk()) return fail(made.status(), "accept");
    *recv_comm = made.value().release();
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guarded(kSubsysNet, "regMr", [&] {
    if (asComm(comm) == nullptr || mhandle == nullptr) return fail(invalid("regMr: bad comm or NULL mhandle"), "regMr");
    *mhandle = nullptr;
    if (type != nccl_abi::kPtrHost) {
      return fail(Status(StatusCode::kInvalidUsage,
                         fmt::format("regMr: memory type {:#x} is not host memory: the Braid net plugin moves host "
                                     "buffers only (ptrSupport = NCCL_PTR_HOST)",
                                     type)),
                  "regMr");
    }
    auto* mr = new MemoryHandle;
    mr->data = data;
    mr->size = size;
    mr->type = type;
    *mhandle = mr;
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void** mhandle) {
  return guarded(kSubsysNet, "regMrDmaBuf", [&] {
    if (mhandle != nullptr) *mhandle = nullptr;
    return fail(Status(StatusCode::kInvalidUsage, "regMrDmaBuf: DMA-BUF memory is not supported (host memory only)"),
                "regMrDmaBuf");
  });
}

int netDeregMr(void* comm, void* mhandle) {
  return guarded(kSubsysNet, "deregMr", [&] {
    auto* mr = as<MemoryHandle>(mhandle, ObjectKind::kMemory);
    if (asComm(comm) == nullptr || mr == nullptr) return fail(invalid("deregMr: bad comm or mhandle"), "deregMr");
    mr->kind = ObjectKind::kDead;
    delete mr;
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netIsend(void* send_comm, void* data, size_t size, int tag, void*, void*, void** request) {
  return guarded(kSubsysNet, "isend", [&] {
    auto* comm = as<SendComm>(send_comm, ObjectKind::kSend);
    if (comm == nullptr || request == nullptr) return fail(invalid("isend: bad sendComm or NULL request"), "isend");
    return sendPost(comm, data, size, tag, request);
  });
}

int netIrecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void**, void**, void** request) {
  return guarded(kSubsysNet, "irecv", [&] {
    auto* comm = as<RecvComm>(recv_comm, ObjectKind::kRecv);
    if (comm == nullptr || request == nullptr) return fail(invalid("irecv: bad recvComm or NULL request"), "irecv");
    // *request may be NCCL_NET_OPTIONAL_RECV_COMPLETION: a real request is returned either way.
    return recvPost(comm, n, data, sizes, tags, request);
  });
}

int netIflush(void* recv_comm, int, void**, int*, void**, void** request) {
  return guarded(kSubsysNet, "iflush", [&] {
    auto* comm = as<RecvComm>(recv_comm, ObjectKind::kRecv);
    if (comm == nullptr || request == nullptr) return fail(invalid("iflush: bad recvComm or NULL request"), "iflush");
    return flushPost(comm, request);
  });
}

int netTest(void* request, int* done, int* sizes) {
  return guarded(kSubsysNet, "test", [&] {
    auto* r = as<Request>(request, ObjectKind::kRequest);
    if (r == nullptr || done == nullptr || !r->used) {
      return fail(invalid("test: not a pending request of the Braid net plugin, or NULL done"), "test");
    }
    return requestTest(r, done, sizes);
  });
}

int netCloseSend(void* send_comm) {
  return guarded(kSubsysNet, "closeSend", [&] {
    auto* comm = as<SendComm>(send_comm, ObjectKind::kSend);
    if (comm == nullptr) return fail(invalid("closeSend: not a send comm"), "closeSend");
    closeComm(comm);
    delete comm;
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netCloseRecv(void* recv_comm) {
  return guarded(kSubsysNet, "closeRecv", [&] {
    auto* comm = as<RecvComm>(recv_comm, ObjectKind::kRecv);
    if (comm == nullptr) return fail(invalid("closeRecv: not a receive comm"), "closeRecv");
    closeComm(comm);
    delete comm;
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netCloseListen(void* listen_comm) {
  return guarded(kSubsysNet, "closeListen", [&] {
    auto* listen = as<ListenComm>(listen_comm, ObjectKind::kListen);
    if (listen == nullptr) return fail(invalid("closeListen: not a listen comm"), "closeListen");
    listen->kind = ObjectKind::kDead;
    delete listen;
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netFinalize(void* ctx) {
  return guarded(kSubsysNet, "finalize", [&] {
    NetContext* c = asContext(ctx);
    if (c == nullptr) return fail(invalid("finalize: not a Braid net context"), "finalize");
    c->kind = ObjectKind::kDead;
    delete c;
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

int netSetNetAttr(void* ctx, nccl_abi::NetAttrV11* attr) {
  return guarded(kSubsysNet, "setNetAttr", [&] {
    NetContext* c = asContext(ctx);
    if (c == nullptr || attr == nullptr) return fail(invalid("setNetAttr: bad context or NULL attr"), "setNetAttr");
    c->attr = *attr;
    BRAID_PLUGIN_LOG(
        kLogTrace, kSubsysNet,
        "NET/Braid: comm {:#x} attributes: send peers {}..{} flows {}..{}, recv peers {}..{} flows {}..{}, "
        "op {:#x} algo {:#x} proto {:#x}",
        c->comm_id, attr->sendCommAttr.minConcurrentPeers, attr->sendCommAttr.maxConcurrentPeers,
        attr->sendCommAttr.minFlowsPerPeer, attr->sendCommAttr.maxFlowsPerPeer, attr->recvCommAttr.minConcurrentPeers,
        attr->recvCommAttr.maxConcurrentPeers, attr->recvCommAttr.minFlowsPerPeer, attr->recvCommAttr.maxFlowsPerPeer,
        attr->op, attr->algo, attr->proto);
    return static_cast<int>(nccl_abi::kSuccess);
  });
}

}  // namespace braid::nccl_plugin
