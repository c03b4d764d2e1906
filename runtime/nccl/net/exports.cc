// The symbols NCCL looks up in a net library (nccl_plugins.md §1.1, §1.4): ncclNetPlugin_v11 ... _v6. v11 points
// at the one implementation (net/plugin.h); older tables are thin adapters:
//   v10: process-wide init (one shared context), connect carries the comm config, no finalize / setNetAttr;
//   v9:  no profiler callback or profiler handles;
//   v8:  int message sizes (at most 1 GiB, MAX_NET_SIZE), size_t regMr size; v7: int regMr size;
//   v6:  no device handles, getDeviceMr / irecvConsumed absent.
// Properties of older versions are the v11 values copied field by field into the older struct.
// net/exports.map keeps every symbol but ncclNetPlugin_v* / ncclTunerPlugin_v* local.
#include <cstring>

#include "abi/net_abi.h"
#include "common/plugin_log.h"
#include "net/devices.h"
#include "net/plugin.h"

namespace {

namespace abi = braid::nccl_abi;
namespace impl = braid::nccl_plugin;

// ---- properties ----

template <class Old>
void copyCommon(const abi::NetPropertiesV11& p, Old* out) {
  out->name = p.name;
  out->pciPath = p.pciPath;
  out->guid = p.guid;
  out->ptrSupport = p.ptrSupport;
  out->speed = p.speed;
  out->port = p.port;
  out->latency = p.latency;
  out->maxComms = p.maxComms;
  out->maxRecvs = p.maxRecvs;
}

int propertiesV10(int dev, abi::NetPropertiesV10* out) {
  abi::NetPropertiesV11 p;
  const int rc = impl::netGetProperties(dev, &p);
  if (rc != abi::kSuccess || out == nullptr) return rc;
  copyCommon(p, out);
  out->regIsGlobal = p.regIsGlobal;
  out->forceFlush = p.forceFlush;
  out->netDeviceType = p.netDeviceType;
  out->netDeviceVersion = p.netDeviceVersion;
  out->vProps = p.vProps;
  out->maxP2pBytes = p.maxP2pBytes;
  out->maxCollBytes = p.maxCollBytes;
  return abi::kSuccess;
}

int propertiesV8(int dev, abi::NetPropertiesV8* out) {
  abi::NetPropertiesV11 p;
  const int rc = impl::netGetProperties(dev, &p);
  if (rc != abi::kSuccess || out == nullptr) return rc;
  copyCommon(p, out);
  out->regIsGlobal = p.regIsGlobal;
  out->netDeviceType = p.netDeviceType;
  out->netDeviceVersion = p.netDeviceVersion;
  return abi::kSuccess;
}

int propertiesV7(int dev, abi::NetPropertiesV7* out) {
  abi::NetPropertiesV11 p;
  const int rc = impl::netGetProperties(dev, &p);
  if (rc != abi::kSuccess || out == nullptr) return rc;
  copyCommon(p, out);
  out->netDeviceType = p.netDeviceType;
  out->netDeviceVersion = p.netDeviceVersion;
  return abi::kSuccess;
}

int propertiesV6(int dev, abi::NetPropertiesV6* out) {
  abi::NetPropertiesV11 p;
  const int rc = impl::netGetProperties(dev, &p);
  if (rc != abi::kSuccess || out == nullptr) return rc;
  copyCommon(p, out);
  return abi::kSuccess;
}

// ---- process-wide init and the shared context ----

int initV10(abi::Logger logger, abi::ProfilerCallback) { return impl::netInitLegacy(logger); }
int initV9(abi::Logger logger) { return impl::netInitLegacy(logger); }

int listenLegacy(int dev, void* handle, void** listen_comm) {
  return impl::netListen(impl::netLegacyContext(), dev, handle, listen_comm);
}
int connectV10(int dev, abi::NetCommConfig*, void* handle, void** send_comm, abi::NetDeviceHandle** dev_comm) {
  return impl::netConnect(impl::netLegacyContext(), dev, handle, send_comm, dev_comm);
}
int connectV9(int dev, void* handle, void** send_comm, abi::NetDeviceHandle** dev_comm) {
  return impl::netConnect(impl::netLegacyContext(), dev, handle, send_comm, dev_comm);
}
int connectV6(int dev, void* handle, void** send_comm) {
  return impl::netConnect(impl::netLegacyContext(), dev, handle, send_comm, nullptr);
}
int acceptV6(void* listen_comm, void** recv_comm) { return impl::netAccept(listen_comm, recv_comm, nullptr); }

// ---- data path without profiler handles / with int sizes ----

int isendV9(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return impl::netIsend(comm, data, size, tag, mhandle, nullptr, request);
}
int irecvV9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  return impl::netIrecv(comm, n, data, sizes, tags, mhandles, nullptr, request);
}

int badSize(const char* what, long long size) {
  braid::nccl_plugin::log(
      abi::kLogWarn, abi::kSubsysNet,
      fmt::format("NET/Braid: {}: size {} is negative or above 1 GiB (struct version <= 8)", what, size));
  return abi::kInvalidArgument;
}

int isendV8(void* comm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0 || static_cast<size_t>(size) > abi::kNetMaxSizeV8) return badSize("isend", size);
  return impl::netIsend(comm, data, static_cast<size_t>(size), tag, mhandle, nullptr, request);
}
int irecvV8(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  size_t wide[impl::kNetMaxRecvs];
  if (n < 1 || n > impl::kNetMaxRecvs || sizes == nullptr) {
    return impl::netIrecv(comm, n, data, nullptr, tags, mhandles, nullptr, request);  // reports the bad argument
  }
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0 || static_cast<size_t>(sizes[i]) > abi::kNetMaxSizeV8) return badSize("irecv", sizes[i]);
    wide[i] = static_cast<size_t>(sizes[i]);
  }
  return impl::netIrecv(comm, n, data, wide, tags, mhandles, nullptr, request);
}
int regMrV7(void* comm, void* data, int size, int type, void** mhandle) {
  if (size < 0) return badSize("regMr", size);
  return impl::netRegMr(comm, data, static_cast<size_t>(size), type, mhandle);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) extern const abi::NetV11 ncclNetPlugin_v11;
__attribute__((visibility("default"))) extern const abi::NetV10 ncclNetPlugin_v10;
__attribute__((visibility("default"))) extern const abi::NetV9 ncclNetPlugin_v9;
__attribute__((visibility("default"))) extern const abi::NetV8 ncclNetPlugin_v8;
__attribute__((visibility("default"))) extern const abi::NetV7 ncclNetPlugin_v7;
__attribute__((visibility("default"))) extern const abi::NetV6 ncclNetPlugin_v6;

const abi::NetV11 ncclNetPlugin_v11 = {
    impl::kNetPluginName,
    impl::netInit,
    impl::netDevices,
    impl::netGetProperties,
    impl::netListen,
    impl::netConnect,
    impl::netAccept,
    impl::netRegMr,
    impl::netRegMrDmaBuf,
    impl::netDeregMr,
    impl::netIsend,
    impl::netIrecv,
    impl::netIflush,
    impl::netTest,
    impl::netCloseSend,
    impl::netCloseRecv,
    impl::netCloseListen,
    nullptr,  // getDeviceMr: no device offload
    nullptr,  // irecvConsumed
    nullptr,  // makeVDevice: no NIC fusion
    impl::netFinalize,
    impl::netSetNetAttr,
};

const abi::NetV10 ncclNetPlugin_v10 = {
    impl::kNetPluginName,
    initV10,
    impl::netDevices,
    propertiesV10,
    listenLegacy,
    connectV10,
    impl::netAccept,
    impl::netRegMr,
    impl::netRegMrDmaBuf,
    impl::netDeregMr,
    impl::netIsend,
    impl::netIrecv,
    impl::netIflush,
    impl::netTest,
    impl::netCloseSend,
    impl::netCloseRecv,
    impl::netCloseListen,
    nullptr,
    nullptr,
    nullptr,
};

const abi::NetV9 ncclNetPlugin_v9 = {
    impl::kNetPluginName,
    initV9,
    impl::netDevices,
    propertiesV10,
    listenLegacy,
    connectV9,
    impl::netAccept,
    impl::netRegMr,
    impl::netRegMrDmaBuf,
    impl::netDeregMr,
    isendV9,
    irecvV9,
    impl::netIflush,
    impl::netTest,
    impl::netCloseSend,
    impl::netCloseRecv,
    impl::netCloseListen,
    nullptr,
    nullptr,
    nullptr,
};

const abi::NetV8 ncclNetPlugin_v8 = {
    impl::kNetPluginName,
    initV9,
    impl::netDevices,
    propertiesV8,
    listenLegacy,
    connectV9,
    impl::netAccept,
    impl::netRegMr,
    impl::netRegMrDmaBuf,
    impl::netDeregMr,
    isendV8,
    irecvV8,
    impl::netIflush,
    impl::netTest,
    impl::netCloseSend,
    impl::netCloseRecv,
    impl::netCloseListen,
    nullptr,
    nullptr,
};

const abi::NetV7 ncclNetPlugin_v7 = {
    impl::kNetPluginName,
    initV9,
    impl::netDevices,
    propertiesV7,
    listenLegacy,
    connectV9,
    impl::netAccept,
    regMrV7,
    impl::netRegMrDmaBuf,
    impl::netDeregMr,
    isendV8,
    irecvV8,
    impl::netIflush,
    impl::netTest,
    impl::netCloseSend,
    impl::netCloseRecv,
    impl::netCloseListen,
    nullptr,
    nullptr,
};

const abi::NetV6 ncclNetPlugin_v6 = {
    impl::kNetPluginName,
    initV9,
    impl::netDevices,
    propertiesV6,
    listenLegacy,
    connectV6,
    acceptV6,
    regMrV7,
    impl::netRegMrDmaBuf,
    impl::netDeregMr,
    isendV8,
    irecvV8,
    impl::netIflush,
    impl::netTest,
    impl::netCloseSend,
    impl::netCloseRecv,
    impl::netCloseListen,
};

}  // extern "C"
