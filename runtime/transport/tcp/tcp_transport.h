// The TCP data transport (createTcpTransport, runtime/transport/factory.h; contract: include/braid/transport.h,
// DataTransport): ranks on any hosts, one endpoint per rank.
//
// Setup (collective over the bootstrap): every rank listens on a port — 127.0.0.1 when every rank has this
// host name, else the bootstrap's address choice (BRAID_SOCKET_IFNAME, the host name's address, loopback) —
// and all-gathers (address, port, random token). Rank i connects to every rank j < i and sends a Hello
// carrying j's token (so a stray connection cannot pose as a peer); it accepts one connection from every
// rank j > i. One TCP connection per pair of ranks carries both directions and every channel. Sockets are
// non-blocking with TCP_NODELAY.
//
// Wire: every message is a 16-byte FrameHeader (type, channel, bytes) then its bytes. Data frames on one
// connection keep their posting order, so the k-th send of (a -> b, channel c) matches the k-th receive b
// posts from a on channel c (FIFO per (peer, channel)). Abort frames carry the reason of a failed endpoint;
// a close frame says the peer destroyed its endpoint normally (EOF after it is not a failure).
//
// Progress runs inside the endpoint's calls (one thread drives an endpoint): postSend writes as much as the
// socket takes at once; poll() reads every connection and writes pending sends. Incoming data is always
// drained: a frame whose receive is already posted (and has no earlier message of its channel queued) is read
// straight into the receive's dst (payload remainders of kDirectReadBytes or more skip the staging buffer),
// any other frame into an unexpected-message buffer that a later receive copies from. So two ranks sending
// each other more than the socket buffers hold never deadlock, and a send completes once its last byte was
// written to its socket (the executor may then reuse src). A blocking poll sleeps in poll(2) on the sockets
// (never spins), waking at least every kPeerCheckMs to ask the bootstrap about failed peers.
//
// Failures: EOF or a reset without a close frame -> kRemoteError naming the peer (its process died), on every
// pending and later call; an abort frame -> kRemoteError with the peer's reason; a close frame while a
// receive from (or a send to) that peer is outstanding -> kRemoteError; no completion for the timeout ->
// kTimeout naming the receives and sends still waiting. abort() sends abort frames (or shuts the sockets
// when a frame is half written) and aborts the bootstrap. The bootstrap must outlive the endpoint.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::tcp {

/// Message types of the wire format.
enum class FrameType : uint32_t { kData = 1, kAbort = 2, kClose = 3 };

/// The header in front of every message, 16 bytes, host byte order (peers share the architecture, as the
/// bootstrap's tables do).
struct FrameHeader {
  uint32_t type = 0;  // FrameType
  int32_t channel = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(FrameHeader) == 16);

/// Read buffer per connection for headers and small payloads.
inline constexpr size_t kStagingBytes = 256 << 10;
/// Payload remainders at least this large are read straight into their destination.
inline constexpr size_t kDirectReadBytes = 64 << 10;
/// Most bytes read from one connection per progress pass (fairness between connections).
inline constexpr size_t kReadBudgetBytes = 16 << 20;
/// Longest sleep of a blocking poll between bootstrap.checkPeers() calls, milliseconds.
inline constexpr int kPeerCheckMs = 100;

}  // namespace braid::tcp
