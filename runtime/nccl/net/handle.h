// The connect handle and the hello every new socket sends (nccl_plugins.md §1.3 "listen", "connect").
//
// listen() writes a ConnectHandle into NCCL's 128-byte handle buffer; NCCL's bootstrap carries the bytes to the
// sender, whose connect() reads them. The sender opens 1 + nsocks TCP connections to (ip, port): index 0 is the
// control connection, 1..nsocks carry the payload (the TCP data path; the UCX data path has nsocks = 0 and moves
// the payload through UCX). Each first writes a Hello with the listener's nonce (a stray connection is dropped)
// and a random connection id that groups the sockets of one connect. Byte order: host (the peers share the
// architecture, as NCCL's own socket transport assumes).
//
// The control connection carries 16-byte records (MessageHeader), told apart by their magic:
//   kHandleMagic   sender -> receiver, one per isend in posting order: the message's size and tag;
//   kAddressMagic  receiver -> sender, UCX only, first: `size` bytes of the receiver's UCX worker address follow;
//   kGoodbyeMagic  either way, last: the writer closes the comm on purpose (a sender: every message it announced
//                  was delivered; `size` = the messages it announced / received). EOF without it is a peer
//                  that died (net/comm.h, "Failures").
// and, with a receiver that admits senders (BRAID_CC_POLICY=adaptive, TCP data path; net/admission.h):
//   kAdmitMagic    receiver -> sender, first and at each change: `tag` 1 = every sender admitted, 0 = gated;
//                  `size` = the receiver's grant size;
//   kCreditedMagic sender -> receiver, instead of kHandleMagic: a message whose payload waits for credit;
//   kGrantMagic    receiver -> sender: `size` bytes of credit;
//   kReportMagic   sender -> receiver: `size` retransmission timeouts on the data sockets since the last report.
//
// connect() keeps its progress between calls the way NCCL's socket plugin does: a pointer to the in-progress
// state lives in the sender's copy of the handle (bytes kConnectStateOffset..+8, zero as listen() wrote them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "braid/status.h"

namespace braid::nccl_plugin {

inline constexpr uint32_t kHandleMagic = 0x42524e54;    // "BRNT"
inline constexpr uint32_t kAddressMagic = 0x42524144;   // "BRAD"
inline constexpr uint32_t kGoodbyeMagic = 0x42524259;   // "BRBY"
inline constexpr uint32_t kAdmitMagic = 0x4252414d;     // "BRAM"
inline constexpr uint32_t kCreditedMagic = 0x42524352;  // "BRCR"
inline constexpr uint32_t kGrantMagic = 0x42524752;     // "BRGR"
inline constexpr uint32_t kReportMagic = 0x42525250;    // "BRRP"
inline constexpr uint16_t kHandleVersion = 3;
/// Longest UCX worker address the sender accepts on the control connection, bytes.
inline constexpr size_t kMaxAddressBytes = 64 << 10;
/// Most sockets (data connections) one comm may use, and threads driving them (NCCL_SOCKET_NTHREADS' limit).
inline constexpr int kMaxSocketsPerComm = 64;
inline constexpr int kMaxThreadsPerComm = 16;
/// Where connect() keeps its state pointer inside the 128-byte handle.
inline constexpr size_t kConnectStateOffset = 64;

/// How a connection moves its payload (BRAID_NET_TRANSPORT): striped TCP sockets, or UCX tag messages.
enum class NetTransport : uint16_t { kTcp = 1, kUcx = 2 };
/// "tcp" / "ucx".
const char* transportName(NetTransport transport);
/// Parses BRAID_NET_TRANSPORT's value ("tcp", "ucx"; case-insensitive). Errors: kInvalidUsage
/// "NET/Braid: BRAID_NET_TRANSPORT=<text>: not tcp or ucx".
Result<NetTransport> parseNetTransport(const std::string& text);

/// What listen() publishes.
struct ConnectHandle {
  uint32_t ip = 0;        // network byte order
  uint16_t port = 0;      // host byte order
  uint16_t nsocks = 1;    // data sockets: TCP 1..kMaxSocketsPerComm, UCX 0
  uint16_t nthreads = 1;  // helper threads per comm: TCP 1..min(nsocks, kMaxThreadsPerComm), UCX 0
  uint64_t nonce = 0;     // random per listen comm
  NetTransport transport = NetTransport::kTcp;  // the listener's data path; the connector must use the same
};

/// Writes `handle` into `out` (kNetHandleMaxSize bytes, the rest zeroed).
void encodeHandle(const ConnectHandle& handle, void* out);
/// Reads a handle. Errors: kInvalidArgument for a NULL buffer, a wrong magic or version, an unknown transport or
/// counts out of range for its transport ("not a Braid net handle", "corrupt net handle").
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

/// One record of the control connection (see above): a message header, a UCX address announcement, a goodbye.
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
