#include "net/handle.h"

#include <cctype>
#include <cstring>
#include <random>

#include "abi/net_abi.h"

namespace braid::nccl_plugin {
namespace {

// The encoded layout (offsets in bytes).
struct WireHandle {
  uint32_t magic;
  uint16_t version;
  uint16_t nsocks;
  uint32_t ip;
  uint16_t port;
  uint16_t nthreads;
  uint64_t nonce;
  uint16_t transport;
  uint16_t reserved[3];
};
static_assert(sizeof(WireHandle) <= kConnectStateOffset);

}  // namespace

void encodeHandle(const ConnectHandle& handle, void* out) {
  std::memset(out, 0, nccl_abi::kNetHandleMaxSize);
  WireHandle wire{};
  wire.magic = kHandleMagic;
  wire.version = kHandleVersion;
  wire.nsocks = handle.nsocks;
  wire.ip = handle.ip;
  wire.port = handle.port;
  wire.nthreads = handle.nthreads;
  wire.nonce = handle.nonce;
  wire.transport = static_cast<uint16_t>(handle.transport);
  std::memcpy(out, &wire, sizeof(wire));
}

Result<ConnectHandle> decodeHandle(const void* in) {
  if (in == nullptr) return Status(StatusCode::kInvalidArgument, "NET/Braid: connect handle is NULL");
  WireHandle wire;
  std::memcpy(&wire, in, sizeof(wire));
  if (wire.magic != kHandleMagic || wire.version != kHandleVersion) {
    return Status(StatusCode::kInvalidArgument, "NET/Braid: not a Braid net handle (wrong magic or version)");
  }
  const bool tcp = wire.transport == static_cast<uint16_t>(NetTransport::kTcp);
  const bool ucx = wire.transport == static_cast<uint16_t>(NetTransport::kUcx);
  const bool tcp_counts = wire.nsocks >= 1 && wire.nsocks <= kMaxSocketsPerComm && wire.nthreads >= 1 &&
                          wire.nthreads <= wire.nsocks && wire.nthreads <= kMaxThreadsPerComm;
  const bool ucx_counts = wire.nsocks == 0 && wire.nthreads == 0;
  if (!(tcp && tcp_counts) && !(ucx && ucx_counts)) {
    return Status(StatusCode::kInvalidArgument, "NET/Braid: corrupt net handle (transport, socket or thread count)");
  }
  if (wire.port == 0) return Status(StatusCode::kInvalidArgument, "NET/Braid: corrupt net handle (port 0)");
  ConnectHandle handle;
  handle.ip = wire.ip;
  handle.port = wire.port;
  handle.nsocks = wire.nsocks;
  handle.nthreads = wire.nthreads;
  handle.nonce = wire.nonce;
  handle.transport = static_cast<NetTransport>(wire.transport);
  return handle;
}

const char* transportName(NetTransport transport) { return transport == NetTransport::kUcx ? "ucx" : "tcp"; }

Result<NetTransport> parseNetTransport(const std::string& text) {
  std::string lower;
  for (char c : text) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "tcp") return NetTransport::kTcp;
  if (lower == "ucx") return NetTransport::kUcx;
  return Status(StatusCode::kInvalidUsage, "NET/Braid: BRAID_NET_TRANSPORT=" + text + ": not tcp or ucx");
}

size_t chunkBytes(size_t size, int nsocks) {
  const size_t share = (size + static_cast<size_t>(nsocks) - 1) / static_cast<size_t>(nsocks);
  return share > kMinChunkBytes ? share : kMinChunkBytes;
}

uint64_t randomU64() {
  static thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine();
}

}  // namespace braid::nccl_plugin
