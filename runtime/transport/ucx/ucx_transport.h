// The UCX data transport (createUcxTransport, runtime/transport/factory.h; contract: include/braid/transport.h,
// DataTransport). Built with BRAID_HAVE_UCX (UCX >= 1.13, ucp); without it createUcxTransport returns
// kUnsupported("built without UCX").
//
// Setup (collective over the bootstrap): one ucp context (UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP, UCX_* variables
// read as UCX reads them), one worker, the worker addresses all-gathered over the bootstrap, and one endpoint
// to every peer with UCP_ERR_HANDLING_MODE_PEER, so a failed connection fails its requests (and is recorded for
// that peer) instead of hanging. When UCX_TLS leaves no transport that supports peer failure handling (UCX
// 1.13's shared-memory transports do not: ucp_ep_create says "Destination is unreachable"), that endpoint is
// created without it and a dead peer is reported through the bootstrap only.
//
// Matching: a message from rank s to rank r on channel c carries the tag
//   bits 63..44 sender rank (< 2^20 - 1) | bits 43..28 channel (< 2^16) | bits 27..0 per-connection sequence number,
// and receive k of r from s on c waits for exactly tag (s, c, k mod 2^28) with a full mask, so receives match
// sends in FIFO order per (sender, receiver, channel) whatever order UCX delivers them in. Receives land in the
// executor's buffer directly; a message of another size than its receive is kInvalidArgument naming both
// ranks and sizes.
//
// Sends are buffered: postSend copies the bytes into a bounce buffer owned by the connection and the send
// completes to the executor at once, while the ucp request stays in flight internally (an eager send finishes
// at once, a rendezvous send when the receiver fetched the data). At most fifo_depth ucp sends are in flight per
// connection; beyond that a send stays queued, uncopied and not complete, until one finishes (NCCL_STEPS-like
// buffering: the executor relies on sends completing before their receives are posted, which rendezvous sends
// alone would not do).
//
// Progress: ucp sends that completed to the executor still need this worker to progress (wireup, TCP
// transmission, rendezvous) after execute() returned and nobody calls poll(). A progress thread does that
// while sends are in flight and the owner has been out of the transport for 2 ms; a mutex serializes it
// with the owner's calls (worker in UCS_THREAD_MODE_SERIALIZED), and it sleeps on the worker's event fd or a
// condition variable otherwise.
//
// Waiting: poll(block) progresses the worker, then arms it (ucp_worker_arm) and sleeps in poll(2) on
// ucp_worker_get_efd in slices of kWaitSliceMs; between slices bootstrap.checkPeers() reports killed or aborted
// ranks (kRemoteError naming the rank), a peer whose endpoint failed is kRemoteError when this rank still waits
// for it, and no completion for the timeout is kTimeout naming the receive or send it waits for.
//
// Teardown: when nothing failed and no receive is outstanding, the endpoint sends every peer a zero-byte closing
// message (tag closingTag(rank)) and waits, up to min(timeout, 10 s), for its in-flight sends and for every
// peer's closing message (or that peer's failure: a failed endpoint, or the bootstrap's report of a dead or
// aborted rank), then flushes the worker and closes endpoints with UCP_EP_CLOSE_FLAG_FORCE. A peer's closing
// message says it has everything it waits for, so no connection closes under a peer still receiving on it. A peer
// in the same process (its transport's random token, all-gathered at setup, is in this process's registry) is not
// waited for once its receives matched every message this rank sent it, or once it was destroyed: its closing
// message would come only when it is destroyed, which, when one thread destroys every rank's communicator in turn,
// is after this one (10 s per destroy otherwise). When something failed or a receive is outstanding, posted
// receives may point into buffers the caller is about to free, so nothing progresses any more: receives are
// cancelled and the worker destroyed.
//
// UCX_TLS, measured in this project's container (Debian 12, UCX 1.13.1, no InfiniBand, processes of one host):
// "all" (the default) and "tcp,self" connect over TCP loopback (the shared-memory transports lack peer failure
// handling, so UCX skips them for these endpoints); "sm,self" (posix/sysv shared memory, cma) works through the
// fallback above. The tests set UCX_TLS=tcp,self unless the environment sets it (see
// tests/transport/ucx_transport_test.cc); every test also passes with UCX_TLS=all or "sm,self".
#pragma once

#include "transport/factory.h"

namespace braid::ucx {

/// Longest single sleep of a blocking poll, milliseconds; peers are checked between sleeps.
inline constexpr int kWaitSliceMs = 50;
/// How long a blocking poll keeps waiting for the bootstrap to explain a failed endpoint (a peer that died or
/// aborted, and why) before it reports the endpoint's failure alone, milliseconds.
inline constexpr int kExplainGraceMs = 1000;
/// Tag field widths (see above).
inline constexpr int kRankBits = 20;
inline constexpr int kChannelBits = 16;
inline constexpr int kSequenceBits = 28;

/// The sender field of closing messages (teardown, see above): no rank has it, so ranks are < 2^20 - 1.
inline constexpr int kClosingSender = (1 << kRankBits) - 1;
/// How often a teardown waiting for closing messages asks the bootstrap about dead peers, milliseconds.
inline constexpr int kClosingCheckMs = 100;

/// The 64-bit UCX tag of message `sequence` (taken mod 2^28) from `sender` on `channel`; sender < 2^20,
/// channel < 2^16 (checked by the transport, kUnsupported beyond).
inline uint64_t messageTag(int sender, int channel, uint64_t sequence) {
  return (static_cast<uint64_t>(sender) << (kChannelBits + kSequenceBits)) |
         (static_cast<uint64_t>(channel) << kSequenceBits) | (sequence & ((uint64_t{1} << kSequenceBits) - 1));
}

/// The tag of `sender`'s closing message: sender field kClosingSender, channel 0, the sender in the sequence field.
inline uint64_t closingTag(int sender) { return messageTag(kClosingSender, 0, static_cast<uint64_t>(sender)); }

}  // namespace braid::ucx
