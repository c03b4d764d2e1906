#include "net/handle.h"

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
};
static_assert(sizeof(WireHandle) <= kConnectStateOffset);

}  // namespace

void encodeHandle(const ConnectHandle& handle, void* out) {
  std::memset(out, 0, nccl_abi::kNetHandleMaxSize);
  WireHandle wire{kHandleMagic, kHandleVersion, handle.nsocks, handle.ip, handle.port, handle.nthreads, handle.nonce};
  std::memcpy(out, &wire, sizeof(wire));
}

Result<ConnectHandle> decodeHandle(const void* in) {
  if (in == nullptr) return Status(StatusCode::kInvalidArgument, "NET/Braid: connect handle is NULL");
  WireHandle wire;
  std::memcpy(&wire, in, sizeof(wire));
  if (wire.magic != kHandleMagic || wire.version != kHandleVersion) {
    return Status(StatusCode::kInvalidArgument, "NET/Braid: not a Braid net handle (wrong magic or version)");
  }
  if (wire.nsocks < 1 || wire.nsocks > kMaxSocketsPerComm || wire.nthreads < 1 || wire.nthreads > wire.nsocks ||
      wire.nthreads > kMaxThreadsPerComm || wire.port == 0) {
    return Status(StatusCode::kInvalidArgument, "NET/Braid: corrupt net handle (socket/thread count or port)");
  }
  ConnectHandle handle;
  handle.ip = wire.ip;
  handle.port = wire.port;
  handle.nsocks = wire.nsocks;
  handle.nthreads = wire.nthreads;
  handle.nonce = wire.nonce;
  return handle;
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
