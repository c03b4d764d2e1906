// The connect handle and the hello every new socket sends (nccl_plugins.md §1.3 "listen", "connect").
//
// listen() writes a ConnectHandle into NCCL's 128-byte handle buffer; NCCL's bootstrap carries the bytes to the
// sender, whose connect() reads them. The sender opens 1 + nsocks TCP connections to (ip, port): index 0 is the
// control connection (one MessageHeader per isend), 1..nsocks carry the payload. Each first writes a Hello
// with the listener's nonce (a stray connection is dropped) and a random connection id that groups the sockets
// of one connect. Byte order: host (the peers share the architecture, as NCCL's own socket transport assumes).
//
// connect() keeps its progress between calls the way NCCL's socket plugin does: a pointer to the in-progress
// state lives in the sender's copy of the handle (bytes kConnectStateOffset..+8, zero as listen() wrote them).
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/status.h"

namespace braid::nccl_plugin {

inline constexpr uint32_t kHandleMagic = 0x42524e54;  // "BRNT"
inline constexpr uint16_t kHandleVersion = 1;
/// Most sockets (data connections) one comm may use, and threads driving them (NCCL_SOCKET_NTHREADS' limit).
inline constexpr int kMaxSocketsPerComm = 64;
inline constexpr int kMaxThreadsPerComm = 16;
/// Where connect() keeps its state pointer inside the 128-byte handle.
inline constexpr size_t kConnectStateOffset = 64;

/// What listen() publishes.
struct ConnectHandle {
  uint32_t ip = 0;        // network byte order
  uint16_t port = 0;      // host byte order
  uint16_t nsocks = 1;    // data sockets, 1..kMaxSocketsPerComm
  uint16_t nthreads = 1;  // helper threads per comm, 1..min(nsocks, kMaxThreadsPerComm)
  uint64_t nonce = 0;     // random per listen comm
};

/// Writes `handle` into `out` (kNetHandleMaxSize bytes, the rest zeroed).
void encodeHandle(const ConnectHandle& handle, void* out);
/// Reads a handle. Errors: kInvalidArgument for a NULL buffer, a wrong magic or version, or counts out of range
/// ("not a Braid net handle").
Result<ConnectHandle> decodeHandle(const void* in);

/// The first bytes on every socket of a connection.
struct Hello {
  uint32_t magic = kHandleMagic;
  uint32_t index = 0;  // 0 = control, 1..nsocks = data
  uint64_t nonce = 0;
  uint64_t conn_id = 0;
  uint32_t nsocks = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(Hello) == 32);

/// One per isend on the control connection, in posting order.
struct MessageHeader {
  uint64_t size = 0;
  int32_t tag = 0;
  uint32_t magic = kHandleMagic;
};
static_assert(sizeof(MessageHeader) == 16);

/// Payload striping: message `seq` of `size` bytes over `nsocks` sockets is cut into chunks of
/// max(kMinChunkBytes, ceil(size / nsocks)) bytes; chunk c travels on socket (seq + c) % nsocks. Both ends
/// compute the same split from the message order.
inline constexpr size_t kMinChunkBytes = 64 << 10;
size_t chunkBytes(size_t size, int nsocks);

/// A random 64-bit value (nonces, connection ids).
uint64_t randomU64();

}  // namespace braid::nccl_plugin
