// The transport interface of Braid's executor (ARCHITECTURE.md §5): post send, post receive, post a local
// copy/reduce, poll for completions. Real transports (threads, shared memory, TCP, UCX, CUDA — issue 5) move
// bytes; the simulated transport (include/braid/simulate.h) advances a virtual clock instead, so what is
// simulated is exactly what the executor runs.
//
// Matching: a send from rank a to rank b on channel c matches the receives b posted from a on channel c in
// FIFO order (MSCCL's connection semantics). Times are microseconds on the transport's clock.
#pragma once

#include <cstdint>
#include <vector>

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

}  // namespace braid
