// The transport interface of Braid's executor (ARCHITECTURE.md §5): post send, post receive, post a local
// copy/reduce, poll for completions. Real transports (threads, shared memory, TCP, UCX) move
// bytes; the simulated transport (include/braid/simulate.h) advances a virtual clock instead, so what is
// simulated is exactly what the executor runs.
//
// Matching: a send from rank a to rank b on channel c matches the receives b posted from a on channel c in
// FIFO order (MSCCL's connection semantics). Times are microseconds on the transport's clock.
#pragma once

#include <cstdint>
#include <vector>

#include "braid/datatype.h"
#include "braid/plan.h"
#include "braid/status.h"

namespace braid {

using RequestId = uint64_t;

struct SendRequest {
  int rank = 0;  // sending rank
  int peer = 0;  // receiving rank
  int channel = 0;
  BufferRef src;  // bytes of `rank`'s buffer to send (src.bytes may be 0: a zero-byte message)
  Protocol protocol = Protocol::kSimple;
};

struct RecvRequest {
  int rank = 0;  // receiving rank
  int peer = 0;  // sending rank
  int channel = 0;
  BufferRef dst;  // where the data lands (real transports); reduce-on-receive is done by the executor
  Protocol protocol = Protocol::kSimple;
};

struct LocalRequest {
  int rank = 0;
  BufferRef src;
  BufferRef dst;
  bool reduce = false;  // false: dst <- src; true: dst <- dst (op) src
  bool fused = false;   // part of a receive-reduce: the simulated transport charges nothing for it
};

struct Completion {
  RequestId id = 0;
  double time_us = 0;  // when it completed, transport clock
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual Result<RequestId> postSend(const SendRequest& request) = 0;
  virtual Result<RequestId> postRecv(const RecvRequest& request) = 0;
  virtual Result<RequestId> postLocal(const LocalRequest& request) = 0;
  /// Appends completed requests to `done`. With `block`, waits until at least one request completes
  /// (the simulated transport advances its clock to the next event); kTimeout when a blocking wait
  /// exceeds the transport's limit; kInternalError / kRemoteError when nothing can ever complete (e.g. a
  /// receive whose sender never posts: the simulated transport reports it as a deadlock naming the ranks).
  virtual Status poll(std::vector<Completion>* done, bool block) = 0;
  /// Current time on the transport's clock, microseconds.
  virtual double nowUs() const = 0;
};

/// The memory one rank works on during a collective (real transports): the user's send and receive buffers
/// as the plan names them (BufferKind::kInput / kOutput; in-place plans never name the aliased one, which
/// may then be bound to the same pointer) and the communicator's scratch (RankPlan::scratch_bytes +
/// temp_bytes at least). Sizes in bytes.
struct RankMemory {
  void* input = nullptr;
  uint64_t input_bytes = 0;
  void* output = nullptr;
  uint64_t output_bytes = 0;
  void* scratch = nullptr;
  uint64_t scratch_bytes = 0;
};

/// What a reducing LocalRequest computes: dst = dst (op) src on elements of `type` (datatype.h; kAvg reduces
/// as a sum, the communicator divides at the end).
struct ReduceSpec {
  DataType type = DataType::kUint8;
  ReduceOp op = ReduceOp::kSum;
};

/// A transport that moves real bytes (runtime/transport/{threads,shm,tcp,ucx}). One endpoint drives the ranks
/// of one executor thread (usually one rank). Matching state (per-connection FIFOs) lives as long as the
/// endpoint: consecutive collectives reuse connections, and every rank runs the same plans in the same order.
///
/// Contract, shared by every data transport:
/// - Every request's BufferRef is checked against the bound RankMemory when posted: out of range is
///   kInvalidArgument naming the rank, buffer and range, so nothing is written past a user buffer.
/// - A send completes once its bytes were copied out of `src` (into the receiver's posted `dst`, into a
///   connection slot, or a socket); it may complete before the receive is posted (at least one message of
///   buffering per connection, NCCL_STEPS = 8 slots recommended) and the executor may then overwrite `src`.
/// - A receive completes once its bytes are in `dst`; a size mismatch between a send and the receive it
///   matches is kInvalidArgument naming both ranks and sizes.
/// - Local requests are done by the calling thread at post time (memcpy / reduceInto) and complete at the
///   next poll.
/// - poll(block = true) sleeps (condition variable, futex, poll(2) or ucp_worker_wait) until something
///   completes: no busy spinning while idle. The one exception is bounded: a blocking poll may first poll
///   its connections for a few µs (shm, threads: BRAID_SPIN_US, default 50; not when the host's ranks
///   outnumber the process's cores; backing off after spins that found nothing), which saves the wake-up of
///   a receiver whose message is in flight.
///   A blocking poll that sees no completion for
///   `timeout_s` (BRAID_TIMEOUT) returns kTimeout naming the rank and what it waits for (peer, channel).
/// - A peer that failed (abort()) or died (its process exited, its connection closed) makes every blocked or
///   later call of this endpoint return kRemoteError naming the peer, well within the timeout.
class DataTransport : public Transport {
 public:
  /// Ranks driven through this endpoint.
  virtual const std::vector<int>& localRanks() const = 0;
  /// Binds the memory of local rank `rank` and the reduction for local reduces, for the next execute().
  /// Errors: kInvalidArgument when `rank` is not local.
  virtual Status bind(int rank, const RankMemory& memory, ReduceSpec reduce) = 0;
  /// This endpoint failed (e.g. execute() returned an error): peers are told (best effort) so they return
  /// kRemoteError instead of waiting for the timeout; later calls here return `why`.
  virtual void abort(const Status& why) = 0;
};

}  // namespace braid
