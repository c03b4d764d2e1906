// The TCP data transport (createTcpTransport, runtime/transport/factory.h; contract: include/braid/transport.h,
// DataTransport): ranks on any hosts, one endpoint per rank.
//
// Setup (collective over the bootstrap): every rank listens on a port — 127.0.0.1 when every rank has this
// host name, else the bootstrap's address choice (BRAID_SOCKET_IFNAME, the host name's address, loopback) —
// and all-gathers (address, port, random token, whether its receivers grant credits). Rank i connects to every
// rank j < i twice — a data connection and a control connection — and sends a Hello carrying j's token (so a
// stray connection cannot pose as a peer) and the connection's kind; it accepts two connections from every rank
// j > i. The data connection of a pair carries both directions and every channel; the control connection carries
// the congestion controller's small frames (acknowledgements, requests, grants), so they never queue behind bulk
// data. Sockets are non-blocking with TCP_NODELAY.
//
// Wire: every frame is a 16-byte FrameHeader (type, channel, bytes). A message of at most one chunk is one
// kMessage frame (header, then its bytes); a longer one is a kBegin frame (its channel and total bytes) followed
// by kChunk frames of at most the sender's current chunk size (runtime/congestion: fixed 512 KiB as NCCL's
// NCCL_BUFFSIZE / NCCL_STEPS, or adaptive). Data frames on one connection keep their posting order, so the k-th
// send of (a -> b, channel c) matches the k-th receive b posts from a on channel c (FIFO per (peer, channel)).
// The receiver acknowledges every kChunk and every kMessage of at least kAckMinBytes on the control connection
// (kAck: how many, and how long the newest waited there), which gives the sender its window accounting and a
// per-chunk RTT. A receiver under the adaptive policy admits senders adaptively (congestion::CreditGranter): while
// its admission is open (the start, unless BRAID_CC_ADMIT makes it start gated, which the setup's listing tells
// every sender) senders chunk freely, as under fixed; a sender whose data connection to it
// timed out tells it so (kReport), and the receiver then closes admission to a number of senders at a time
// (AIMD: halved per report, at least BRAID_CC_CREDITS, one more per round of grants without a report) and tells
// every sender (kAdmit); a sender then asks (kRequest, bytes) and chunks only what was granted (kGrant, bytes and
// the receiver's fan-in), until admission opens again (kAdmit). Chunks say whether they spend a grant; a sender
// gives back credit its messages no longer need (kRelease: a grant that arrived after admission opened and the
// bytes went without it); messages up to the eager size (64 KiB) go whole and need no grant.
// Abort frames carry the reason of a failed endpoint; a close frame says the peer destroyed its endpoint normally
// (EOF after it is not a failure). Abort and close travel on the data connection, after the data.
//
// Progress runs inside the endpoint's calls (one thread drives an endpoint): postSend writes what the window,
// the grants and the active-peer bound (BRAID_CC_ACTIVE_PEERS) allow at once; poll() reads every connection and
// writes pending frames. Incoming data is always drained: a message whose receive is already posted (and has no
// earlier message of its channel queued) is read straight into the receive's dst (payload remainders of
// kDirectReadBytes or more skip the staging buffer), any other into an unexpected-message buffer that a later
// receive copies from. So two ranks sending each other more than the socket buffers hold never deadlock, and a
// send completes once its last byte was written to its socket (the executor may then reuse src); while its
// receiver's admission is closed, a send larger than the eager size completes only once the receiver granted it,
// which it does from any call into its endpoint. A blocking poll sleeps in poll(2) on the sockets (never spins), waking
// at least every kPeerCheckMs to ask the bootstrap about failed peers.
//
// Failures: EOF or a reset without a close frame -> kRemoteError naming the peer (its process died), on every
// pending and later call; an abort frame -> kRemoteError with the peer's reason; a close frame while a
// receive from (or a send to) that peer is outstanding -> kRemoteError; a malformed frame (a chunk outside a
// message, an acknowledgement of more than was sent, more data than granted) -> kRemoteError naming it; no
// completion for the timeout -> kTimeout naming the receives and sends still waiting (and what a send waits for:
// the window, a grant, an active-peer slot, or the peer reading). abort() sends abort frames (or shuts the
// sockets when a frame is half written) and aborts the bootstrap. The bootstrap must outlive the endpoint.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::tcp {

/// Message types of the wire format.
enum class FrameType : uint32_t {
  kMessage = 1,   // a whole message: channel, bytes; the bytes follow
  kAbort = 2,     // bytes: length of the reason that follows
  kClose = 3,     // no payload
  kBegin = 4,     // a message sent in chunks: channel, total bytes; no payload
  kChunk = 5,     // bytes of the message begun last; they follow; channel 1: against a grant, 0: not
  kAck = 6,       // control connection: channel = frames acknowledged, bytes = µs the newest waited at the receiver
  kRequest = 7,   // control connection: bytes the sender wants granted
  kGrant = 8,     // control connection: bytes granted; channel = senders holding grants at the receiver (fan-in)
  kReport = 9,    // control connection, sender -> receiver: channel = retransmission timeouts, bytes = segments
                  // retransmitted since the last report
  kAdmit = 10,    // control connection, receiver -> sender: channel = 1 admission open (send without asking),
                  // 0 closed (ask first); bytes = senders admitted at once
  kRelease = 11,  // control connection, sender -> receiver: bytes granted that the sender will not use (its
                  // messages went while admission was open): they count as arrived
};

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
/// Whole-message frames at least this large are acknowledged (and count in the sender's window); smaller ones
/// are neither, so small-message latency pays no acknowledgement.
inline constexpr uint64_t kAckMinBytes = 16 << 10;
/// Most payload bytes committed to a connection's write queue at once (frames behind them wait for the window).
inline constexpr uint64_t kCommitBytes = 1 << 20;
/// Longest sleep of a blocking poll between bootstrap.checkPeers() calls, milliseconds.
inline constexpr int kPeerCheckMs = 100;

}  // namespace braid::tcp
