// The shared-memory data transport: ranks of one host, in separate processes or in threads of one process
// (createShmTransport, runtime/transport/factory.h; contract: include/braid/transport.h, DataTransport).
//
// Layout. Every rank r creates one POSIX shared-memory segment (shm_open + ftruncate + mmap) named
// segmentName(): "/braid-shm-<rank 0's pid>-<nonce>-<r>" (the nonce is rank 0's random 64-bit number, so
// concurrent communicators and tests never collide). It holds everything the ranks sending TO r share with r:
//
//   [header: magic, geometry, r's doorbell, r's waiter count, r's failed flag]      one page
//   [directory: for every sender s, kRingsPerPair 32-bit keys (channel + 1; 0 = free)]
//   [rings: for every sender s, kRingsPerPair rings; ring i of s belongs to the channel in key i of s]
//
// and every rank maps every other rank's segment. Once all ranks mapped all segments (a bootstrap
// all-gather of everyone's setup status), each rank shm_unlinks its own, so nothing is left in /dev/shm
// even when a process is killed later.
//
// Channels: a (sender, receiver, channel) connection gets its ring on first use, by whichever side posts on
// it first. The channel's key is claimed with a compare-and-swap in the sender's directory of the receiver's
// segment (open addressing, first probe channel % kRingsPerPair), so any channel id works, up to
// kRingsPerPair distinct channels per ordered pair (kUnsupported beyond, naming the pair). The segment is
// sparse: its size is reserved virtually (ftruncate, MAP_NORESERVE) and a ring's pages are allocated with
// fallocate when the ring is first used, so a full /dev/shm is a kSystemError naming the connection rather
// than a SIGBUS, and unused channels cost address space only.
//
// Ring (single producer = the sender's endpoint, single consumer = the receiver's): head (slots filled,
// written by the sender) and tail (slots consumed, written by the receiver) are 64-bit counters on their own
// cache lines, accessed lock-free with acquire/release (std::atomic_ref on the shared words); then
// fifo_depth slot descriptors {message bytes, fragment bytes}; then fifo_depth data slots of slot_bytes. A
// message takes ceil(bytes / slot_bytes) consecutive slots (one slot when it has 0 bytes); the receiver
// checks every fragment's message size against its receive (kInvalidArgument naming both ranks and sizes).
// Messages larger than the whole ring (fifo_depth x slot_bytes) are first copied into a private buffer at
// post time, so every send can complete before its receive is posted.
//
// Progress happens in the owning endpoint's calls: postSend/postRecv try their connection at once, poll()
// moves pending sends into free slots and arrived slots into posted receives, FIFO per connection. The one
// exception is a privately buffered message, which completed to the executor but still streams through the
// ring as the receiver frees slots: a progress thread, started with the first such message, moves those on
// once the owner has been out of the transport for 2 ms (a mutex serializes it with the owner's calls), so
// they arrive even when the sender stopped calling the transport after its last send.
//
// Waiting. Every rank's segment has a 32-bit doorbell. A sender that filled slots of r, or a receiver that
// freed slots of its sender s, increments the doorbell of r or s and, when that rank announced a waiter,
// FUTEX_WAKEs it (shared futex: works across processes and across two mappings in one process). A blocking
// poll first spins for up to BRAID_SPIN_US µs (TransportOptions::spin_us; not when the ranks outnumber the
// cores, and backing off after spins that found nothing: SpinGovernor, endpoint_common.h), progressing each
// time its doorbell moves, without announcing a waiter; then it reads its doorbell, announces a waiter, retries
// progress, then FUTEX_WAITs on the value read, in slices of kWaitSliceMs; between slices it checks the peers' failed
// flags and bootstrap.checkPeers() (a killed peer closed its bootstrap sockets), so a dead or aborted peer is
// kRemoteError naming it within a slice, and a poll that sees no completion for the timeout is kTimeout naming the
// connection it waits on.
#pragma once

#include <cstdint>
#include <string>

#include "braid/status.h"
#include "transport/factory.h"

namespace braid::shm {

/// "/braid-shm-<rank0_pid>-<nonce as 16 hex digits>-<rank>": the shm_open name of `rank`'s segment.
std::string segmentName(int64_t rank0_pid, uint64_t nonce, int rank);

/// Distinct channels per ordered (sender, receiver) pair that can have a ring.
inline constexpr int kRingsPerPair = 128;
/// Longest single futex sleep of a blocking poll, milliseconds; peers are checked between sleeps.
inline constexpr int kWaitSliceMs = 50;

/// Byte geometry of one rank's segment (all offsets from the segment's start, page-aligned where noted).
struct SegmentLayout {
  int num_ranks = 0;
  int fifo_depth = 0;
  uint64_t slot_bytes = 0;
  uint64_t directory_offset = 0;  // num_ranks * kRingsPerPair uint32 keys
  uint64_t rings_offset = 0;      // page-aligned
  uint64_t ring_bytes = 0;        // page-aligned: counters, descriptors, then page-aligned data slots
  uint64_t ring_data_offset = 0;  // from the ring's start
  uint64_t slot_stride = 0;       // slot_bytes rounded up to 64
  uint64_t total_bytes = 0;

  /// Errors: kInvalidArgument for num_ranks < 1, fifo_depth < 1 or slot_bytes < 1, or a segment beyond 2^46
  /// bytes (naming the numbers).
  static Result<SegmentLayout> make(int num_ranks, int fifo_depth, uint64_t slot_bytes);
  uint64_t ringOffset(int sender, int index) const {
    return rings_offset + (static_cast<uint64_t>(sender) * kRingsPerPair + static_cast<uint64_t>(index)) * ring_bytes;
  }
};

}  // namespace braid::shm
