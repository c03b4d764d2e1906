// NCCL's net plugin ABI, struct versions 6 to 11, written from the documented layout
// (../shared/reference/nccl_plugins.md §1.2-§1.5; nccl@2.28.9 src/include/plugin/nccl_net.h, net/net_v6.h ...
// net_v11.h, nccl_device/net_device.h). Member order and types are the ABI: a struct here must match NCCL's
// member for member (the static_asserts below pin sizes and offsets on LP64).
//
// Conventions every version shares (nccl@2.28.9 ext-net/README.md):
//   * every function returns an ncclResult_t (nccl_abi::Result) as int;
//   * connect / accept never block: success with *comm == NULL means "call again";
//   * isend / irecv may return success with *request == NULL: "no request slot free, try later";
//   * test(request, done, sizes) frees the request once it reports *done = 1.
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi/nccl_types.h"

namespace braid::nccl_abi {

/// NCCL_NET_HANDLE_MAXSIZE: bytes of the connect handle listen() fills (NCCL owns the buffer).
inline constexpr size_t kNetHandleMaxSize = 128;
/// NCCL_NET_MAX_REQUESTS: outstanding requests each send / receive comm must accept (a send comm:
/// kNetMaxRequests x maxRecvs isends, README "Communication").
inline constexpr int kNetMaxRequests = 32;
/// NCCL_MAX_NET_SIZE_BYTES (1 TiB): the largest maxP2pBytes / maxCollBytes NCCL accepts.
inline constexpr size_t kNetMaxSizeBytes = size_t{1} << 40;
/// MAX_NET_SIZE (1 GiB): the size cap of struct versions <= 8, whose sizes are int.
inline constexpr size_t kNetMaxSizeV8 = size_t{1} << 30;
/// NCCL_NET_MAX_DEVS_PER_NIC: physical devices one virtual NIC may fuse.
inline constexpr int kNetMaxDevsPerNic = 4;

/// NCCL_PTR_*: bits of ncclNetProperties::ptrSupport and values of regMr's `type`.
inline constexpr int kPtrHost = 0x1;
inline constexpr int kPtrCuda = 0x2;
inline constexpr int kPtrDmaBuf = 0x4;

/// NCCL_NET_OPTIONAL_RECV_COMPLETION: the value NCCL stores in *request before irecv when the receive may
/// complete early (LL / LL128, n == 1); the plugin must still return a request test() can poll.
inline void* const kOptionalRecvCompletion = reinterpret_cast<void*>(0x1);
/// NCCL_NET_MULTI_REQUEST (defined by NCCL, unused by 2.28).
inline constexpr uintptr_t kNetMultiRequest = 0x2;

/// NCCL_NET_TRAFFIC_CLASS_UNDEF / NCCL_NET_ATTR_UNDEF: "not set".
inline constexpr int kNetTrafficClassUndef = -1;
inline constexpr int kNetAttrUndef = -1;

/// ncclNetDeviceType (nccl_device/net_device.h).
enum NetDeviceType : int {
  kNetDeviceHost = 0,
  kNetDeviceUnpack = 1,
  kNetDeviceGinProxy = 2,
  kNetDeviceGinGdaki = 3,
};

/// ncclNetDeviceHandle_v7 ... v11 (all the same): what a device-offload plugin hands back from connect/accept.
struct NetDeviceHandle {
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

/// ncclProfilerCallback_t: the profiler hook v10+ init receives (stored, not called).
using ProfilerCallback = int (*)(void** event_handle, int type, void* parent_handle, int64_t plugin_id, void* ext_data);

/// ncclNetVDeviceProps_v9 ... v11: a virtual NIC made of `ndevs` physical device indices.
struct NetVDeviceProps {
  int ndevs;
  int devs[kNetMaxDevsPerNic];
};

/// ncclNetCommConfig_v10 / v11: per-communicator configuration (trafficClass -1 = undefined).
struct NetCommConfig {
  int trafficClass;
};

/// ncclNetCommAttr_v11: concurrency hints for one direction (-1 = undefined).
struct NetCommAttr {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
};

/// ncclNetAttr_v11: setNetAttr's hints; op / algo / proto are bitmasks of ncclFunc_t / algorithm / protocol
/// indices (all bits set = undefined).
struct NetAttrV11 {
  NetCommAttr sendCommAttr;
  NetCommAttr recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
};

// ---- properties: each version appends fields (speed in Mbps, latency in microseconds) ----

struct NetPropertiesV6 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
};

struct NetPropertiesV7 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
};

struct NetPropertiesV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
};

/// v9 and v10 have the same properties.
struct NetPropertiesV9 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDeviceProps vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
};
using NetPropertiesV10 = NetPropertiesV9;

struct NetPropertiesV11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDeviceProps vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};

// ---- the function tables (ncclNet_vN_t), members in NCCL's order ----

/// ncclNet_v11_t (NCCL 2.28): per-communicator context from init; finalize and setNetAttr.
struct NetV11 {
  const char* name;
  int (*init)(void** ctx, uint64_t commId, NetCommConfig* config, Logger logger, ProfilerCallback profiler);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, NetPropertiesV11* props);
  int (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  int (*connect)(void* ctx, int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  int (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  int (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
               void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  int (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  int (*irecvConsumed)(void* recvComm, int n, void* request);
  int (*makeVDevice)(int* d, NetVDeviceProps* props);
  int (*finalize)(void* ctx);
  int (*setNetAttr)(void* ctx, NetAttrV11* attr);
};

/// ncclNet_v10_t: process-wide init with a profiler callback; connect takes the comm config; phandles.
struct NetV10 {
  const char* name;
  int (*init)(Logger logger, ProfilerCallback profiler);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, NetPropertiesV10* props);
  int (*listen)(int dev, void* handle, void** listenComm);
  int (*connect)(int dev, NetCommConfig* config, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  int (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  int (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
               void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  int (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  int (*irecvConsumed)(void* recvComm, int n, void* request);
  int (*makeVDevice)(int* d, NetVDeviceProps* props);
};

/// ncclNet_v9_t: size_t sizes, makeVDevice; no profiler.
struct NetV9 {
  const char* name;
  int (*init)(Logger logger);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, NetPropertiesV9* props);
  int (*listen)(int dev, void* handle, void** listenComm);
  int (*connect)(int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  int (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  int (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  int (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  int (*irecvConsumed)(void* recvComm, int n, void* request);
  int (*makeVDevice)(int* d, NetVDeviceProps* props);
};

/// ncclNet_v8_t: int message sizes, size_t regMr size.
struct NetV8 {
  const char* name;
  int (*init)(Logger logger);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, NetPropertiesV8* props);
  int (*listen)(int dev, void* handle, void** listenComm);
  int (*connect)(int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  int (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  int (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  int (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  int (*irecvConsumed)(void* recvComm, int n, void* request);
};

/// ncclNet_v7_t: as v8 with an int regMr size.
struct NetV7 {
  const char* name;
  int (*init)(Logger logger);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, NetPropertiesV7* props);
  int (*listen)(int dev, void* handle, void** listenComm);
  int (*connect)(int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  int (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  int (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  int (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  int (*irecvConsumed)(void* recvComm, int n, void* request);
};

/// ncclNet_v6_t: the oldest NCCL 2.28 loads; no device handles.
struct NetV6 {
  const char* name;
  int (*init)(Logger logger);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, NetPropertiesV6* props);
  int (*listen)(int dev, void* handle, void** listenComm);
  int (*connect)(int dev, void* handle, void** sendComm);
  int (*accept)(void* listenComm, void** recvComm);
  int (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
};

// Layout checks (LP64): a wrong member order or type shows up here, not inside NCCL.
static_assert(sizeof(NetDeviceHandle) == 32);
static_assert(sizeof(NetAttrV11) == 44);
static_assert(sizeof(NetPropertiesV6) == 48);
static_assert(sizeof(NetPropertiesV7) == 56);
static_assert(sizeof(NetPropertiesV8) == 64);
static_assert(offsetof(NetPropertiesV9, vProps) == 64 && sizeof(NetPropertiesV9) == 104);
static_assert(offsetof(NetPropertiesV11, maxMultiRequestSize) == 104 && sizeof(NetPropertiesV11) == 112);
static_assert(sizeof(NetV6) == 17 * sizeof(void*));
static_assert(sizeof(NetV7) == 19 * sizeof(void*) && sizeof(NetV8) == 19 * sizeof(void*));
static_assert(sizeof(NetV9) == 20 * sizeof(void*) && sizeof(NetV10) == 20 * sizeof(void*));
static_assert(sizeof(NetV11) == 22 * sizeof(void*));

}  // namespace braid::nccl_abi
