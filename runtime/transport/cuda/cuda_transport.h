// The CUDA data transport (createCudaTransport, include/braid/cuda.h; contract: include/braid/transport.h,
// DataTransport): the host-driven way to run plans on GPUs. One endpoint per rank and GPU.
//
// What moves how:
//   - Local copies and reductions: runtime/cuda's kernels (launchCopy, launchReduce) on the rank's local stream;
//     each completes when the event recorded after it has (not at post time, unlike the CPU transports).
//   - Messages: NCCL's ncclSend / ncclRecv on one two-rank communicator per ordered pair (sender, receiver),
//     each with its own stream. NCCL executes the operations of a communicator in the order they were enqueued,
//     on the device, and a send or receive waits there for its match. Braid's matching is FIFO per (sender,
//     receiver, channel), and a send must be able to complete before its receive is posted. Both are built on
//     top, so that nothing the executor does can make two ranks wait for each other on the device:
//       * a send is copied into a staging buffer (stream-ordered allocation from the endpoint's memory pool) on
//         the staging stream and then sent from there on the pair's communicator; the send completes when the
//         copy has and its announcement (below) has left, so the executor may reuse src at once;
//       * the sender announces every message on a control transport (a CPU transport: threads, shm or tcp, as
//         createTransport(kAuto) picks) as a ControlMessage (channel, bytes), in the order it enqueues the sends;
//       * the receiver, whenever it polls, enqueues one ncclRecv per announced message, in announcement order:
//         into the posted receive's dst when one of that channel is waiting (sizes compared: a mismatch is
//         kInvalidArgument naming both ranks and both sizes), else into a staging buffer that a later receive
//         of that channel copies from (a kernel on the local stream). Zero-byte messages move no data; the
//         announcement alone matches them.
//     So every communicator carries one direction in one order both sides agree on, every receive NCCL waits for
//     is enqueued as soon as the receiver polls, and a sender that stays away from the transport after its
//     sends completed still delivers them (its sends are already on the device; frees of staging are
//     stream-ordered). Communicators of one direction only: with both directions on one communicator, two ranks
//     each waiting in a receive enqueued before their own send would wait for each other forever. No
//     ncclGroupStart/End around operations of different communicators, for the same reason: a group completes
//     as a whole, which would make one message wait for an unrelated one.
//   - Staging per (peer, channel) is bounded by TransportOptions::fifo_depth messages announced but not yet
//     received by the peer; a send beyond it waits (incomplete) until one is.
//
// Failures: a peer's abort or death reaches this endpoint through the control transport (kRemoteError naming the
// peer); NCCL's asynchronous errors (ncclCommGetAsyncError) are kUnhandledCudaError naming the peer; a blocking
// poll that sees nothing complete for timeout_s is kTimeout naming what it waits for. abort() aborts the control
// transport (the peers are told) and every NCCL communicator (operations waiting on the device end).
// A blocking poll polls events and the control transport, spinning for BRAID_SPIN_US and then sleeping in
// growing steps (up to kMaxSleepUs): CUDA events cannot be waited on together.
//
// Setup, collective over the bootstrap (every step agreed, so all ranks fail together): select and set the
// device; create the control transport; every rank creates the NCCL ids of its outgoing pairs and all-gathers
// them; every rank initialises its 2(n-1) communicators in one NCCL group (NCCL initialises them in parallel);
// streams and the memory pool. The endpoint's destructor waits (up to min(timeout, 10 s)) until its announced
// messages were received by the peers, then destroys the communicators (aborts them after a failure).
#pragma once

#include <cstdint>

namespace braid::cuda_transport {

/// Message types of the control transport.
enum class ControlType : uint32_t { kMessage = 1 };

/// What a sender tells its receiver for every message, in the order it enqueues them, on control channel 0.
struct ControlMessage {
  uint32_t type = 0;  // ControlType
  int32_t channel = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(ControlMessage) == 16);

/// Control messages in flight from one endpoint (slots of its control send buffer).
inline constexpr uint32_t kControlSlots = 4096;
/// Longest sleep of a blocking poll between checks of events and the control transport, microseconds.
inline constexpr int kMaxSleepUs = 200;

}  // namespace braid::cuda_transport
