// EndpointBase: the part of a data transport endpoint (runtime/transport/{threads,shm,tcp,ucx}) that is the same
// for every transport, so that each one implements only how its bytes move:
//
//   - the DataTransport calls themselves (bind, postSend, postRecv, postLocal, poll, abort), in this order per
//     post: the sticky failure, the request's ends (checkRequestEnds), its buffer range (LocalMemory::resolve),
//     a new request id, then the transport's startSend / startRecv;
//   - the one sticky failure state: the first error of progress, of a blocking wait (a timeout included) or of
//     abort() is kept, and every later call returns it (bad arguments of one post are returned, not kept);
//   - request ids (1, 2, 3 ... per endpoint) and the completion list, each completion stamped when it happened
//     (µs since the endpoint's epoch); poll() moves the list into the caller's vector;
//   - local requests (copy / reduce): checked, then startLocal(), which by default runs them on the calling thread
//     at post time; they complete at the next poll (the CUDA transport runs them as kernels instead);
//   - the blocking-wait bookkeeping shared by the transports that sleep in slices (BlockingWait with the time of
//     the last bootstrap.checkPeers(), kept across polls) and the timeout's text (noCompletionTimeout);
//   - for endpoints with a background progress thread (shm, ucx), the lock every call holds (ProgressThread).
//
// poll(done, block): failure -> progress() -> when nothing completed and `block`, waitForCompletion() -> the
// completions. Messages start with the transport's name ("shm: rank 2: ..."), errors that name a connection
// with both ranks ("rank 0 -> rank 1 channel 3: ...").
#pragma once

#include <chrono>
#include <climits>
#include <optional>
#include <string>
#include <vector>

#include "braid/bootstrap.h"
#include "braid/status.h"
#include "braid/transport.h"
#include "transport/endpoint_common.h"
#include "transport/local_memory.h"

namespace braid {

class EndpointBase : public DataTransport {
 public:
  /// What an endpoint is: its transport's name, the rank it drives among `size`, and its rules.
  struct Config {
    const char* name = "";  // "threads", "shm", "tcp", "ucx": the prefix of messages
    int rank = 0;
    int size = 0;
    double timeout_s = 0;            // of a blocking poll, seconds (endpointTimeoutSeconds)
    int channel_limit = INT_MAX;     // channels accepted: [0, channel_limit)
    bool progress_thread = false;    // every call holds progressThread().mutex() (shm, ucx)
    Bootstrap* bootstrap = nullptr;  // asked about dead or aborted peers (bootstrapFailure); may be null
    std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();  // nowUs() == 0 here
  };

  const char* name() const final { return name_; }
  const std::vector<int>& localRanks() const final { return memory_.ranks(); }
  double nowUs() const final {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch_).count();
  }
  Status bind(int rank, const RankMemory& memory, ReduceSpec reduce) final;
  Result<RequestId> postSend(const SendRequest& request) final;
  Result<RequestId> postRecv(const RecvRequest& request) final;
  Result<RequestId> postLocal(const LocalRequest& request) final;
  Status poll(std::vector<Completion>* done, bool block) final;
  /// Keeps `why` as the failure (unless one is kept already; an ok `why` becomes kInternalError "<name>: rank R
  /// aborted"), then tellPeersOfAbort() with the failure kept.
  void abort(const Status& why) final;

 protected:
  explicit EndpointBase(const Config& config);

  /// Starts a checked send of `request.src.bytes` bytes at `src` (in bound memory) as request `id`. An error is
  /// returned by postSend as it is: call fail() first for errors that must stick.
  virtual Status startSend(const SendRequest& request, const uint8_t* src, RequestId id) = 0;
  /// Starts a checked receive into `dst` as request `id`; errors as startSend.
  virtual Status startRecv(const RecvRequest& request, uint8_t* dst, RequestId id) = 0;
  /// Starts a checked local request as request `id`: by default runs it on the calling thread and completes it
  /// (the data transports of host memory); the CUDA transport launches a kernel. Errors are returned by postLocal.
  virtual Status startLocal(const LocalMemory::Resolved& local, RequestId id);
  /// Moves whatever can move without waiting, calling complete() for finished requests. An error sticks.
  virtual Status progress() = 0;
  /// Called by a blocking poll when nothing has completed: waits until something completes (ok), or returns
  /// why it cannot (a failed peer, timeoutError() after timeout_s_). An error sticks.
  virtual Status waitForCompletion() = 0;
  /// abort(): tells the peers (best effort) that this endpoint failed with `reason`.
  virtual void tellPeersOfAbort(const Status& reason) = 0;
  /// The failure every call checks first; transports that learn of failures outside their calls (threads:
  /// the world's failure flag) override it and call fail().
  virtual Status currentFailure() { return failure_; }

  /// Keeps `status` when it is the first error; returns `status`.
  Status fail(Status status) {
    if (!status.isOk() && failure_.isOk()) failure_ = status;
    return status;
  }
  const Status& failure() const { return failure_; }
  bool failed() const { return !failure_.isOk(); }

  /// Request `id` completed now / at `completion.time_us` (another thread's stamp on this clock).
  void complete(RequestId id) { completed_.push_back(Completion{id, nowUs()}); }
  void complete(const Completion& completion) { completed_.push_back(completion); }
  bool hasCompletions() const { return !completed_.empty(); }

  /// The bookkeeping of one blocking wait that sleeps in slices of `slice_ms`; the last peer check is the
  /// endpoint's, so the first wait checks at once and later ones at most once per slice.
  BlockingWait beginWait(int slice_ms) { return BlockingWait(timeout_s_, slice_ms, &last_peer_check_); }
  /// kRemoteError "<name>: rank R: <the bootstrap's report>" when the bootstrap knows of a dead or aborted peer.
  Status bootstrapFailure() const;
  /// kTimeout "<name>: rank R: no completion for W s (BRAID_TIMEOUT); waiting for <waiting_for>".
  Status timeoutError(double waited_s, const std::string& waiting_for) const {
    return noCompletionTimeout(name_, rank_, waited_s, waiting_for);
  }

  /// The background thread of shm and ucx; the derived destructor stops it before freeing what it touches.
  ProgressThread& progressThread() { return progress_; }

  const int rank_;
  const int size_;
  const double timeout_s_;

 private:
  // postSend / postRecv: checks, then start(bytes, id) (endpoint_base.cc).
  template <typename Start>
  Result<RequestId> post(int rank, int peer, int channel, const BufferRef& ref, const char* what, const char* field,
                         Start start);

  // Holds the progress thread's mutex for the duration of one call when the endpoint has one.
  class CallGuard {
   public:
    explicit CallGuard(EndpointBase& endpoint) {
      if (endpoint.has_progress_thread_) guard_.emplace(endpoint.progress_);
    }

   private:
    std::optional<ProgressThread::CallGuard> guard_;
  };

  const char* const name_;
  const int channel_limit_;
  const bool has_progress_thread_;
  Bootstrap* const bootstrap_;
  const std::chrono::steady_clock::time_point epoch_;
  LocalMemory memory_;
  ProgressThread progress_;
  Status failure_;
  RequestId next_id_ = 1;
  std::vector<Completion> completed_;
  std::chrono::steady_clock::time_point last_peer_check_;  // epoch of the clock: the first wait checks at once
};

}  // namespace braid
