// Pieces the data transports (runtime/transport/{threads,shm,tcp,ucx}) share besides EndpointBase
// (endpoint_base.h, which uses most of them): the timeout and spin defaults, the checks of a request's ends, the
// setup agreement over the bootstrap, the bookkeeping of a blocking poll that sleeps in slices, and the lock an
// endpoint shares with its background progress thread. Messages start with the transport's name ("shm: rank 2:
// ...").
#pragma once

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "braid/bootstrap.h"
#include "braid/status.h"
#include "braid/transport.h"
#include "transport/factory.h"

namespace braid {

/// Seconds a blocking poll waits for a completion: resolveTimeoutSeconds(options.timeout_s) (common/env.h:
/// options.timeout_s when > 0, else BRAID_TIMEOUT, at most kMaxTimeoutSeconds). createTransport refuses a bad
/// value before any endpoint is built; should one reach here, 300 s.
double endpointTimeoutSeconds(const TransportOptions& options);

/// The ends of a send or receive (`what`: "send", "recv") posted to the endpoint of rank `self` among `size`
/// ranks: `rank` must be `self` and `peer` another rank. Errors: kInvalidArgument "<transport>: ..." naming them.
Status checkRequestPeer(const char* transport, int self, int size, int rank, int peer, const char* what);
/// checkRequestPeer, and `channel` in [0, channel_limit). Errors: kInvalidArgument naming the rank, peer and
/// channel.
Status checkRequestEnds(const char* transport, int self, int size, int rank, int peer, int channel, const char* what,
                        int channel_limit = INT_MAX);

/// A hint to the CPU that this thread spins (x86 PAUSE: less power, no memory-order mis-speculation penalty).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// µs a blocking poll of an endpoint whose host runs `local_ranks` ranks may spin before it sleeps (saving the
/// futex wake-up and context switch of a receiver whose message arrives meanwhile): `options.spin_us` when >= 0,
/// else BRAID_SPIN_US (default 50), at most kMaxSpinMicroseconds (common/env.h); 0 when `local_ranks` outnumber
/// the cores this process may run on (sched_getaffinity): a spinning rank would hold the core of the rank it
/// waits for. (Yielding between polls instead, Open MPI's rule when oversubscribed, was measured and rejected:
/// 4 ranks on 2 cores went from 50-100 µs to 11-17 µs per 1 KiB all-reduce on a quiet machine, but from
/// 25-250 µs to 1.2-1.4 ms with two other busy programs; docs/performance.md, runs 8-10.)
double endpointSpinMicroseconds(const TransportOptions& options, int local_ranks);

/// The spinning phase of an endpoint's blocking polls, adaptive. A spin pays off only when the message arrives
/// within it and the spinning thread keeps its core meanwhile; when other programs compete for the cores, a
/// spinning rank loses its time slice and wakes up later than a sleeping one would (measured: a 2-rank 1 KiB
/// all-reduce under two compilers on 2 cores took 13-30 µs sleeping, 130-300 µs always spinning, 17-30 µs with
/// this backoff). So a spin that finds nothing within its budget, or finds it only after more than twice the
/// budget of wall time (the thread was descheduled), counts as failed: the next `backoff` blocking polls sleep
/// at once, and `backoff` doubles (1, 2, 4 ... kMaxSkippedSpins) with every failure in a row; a spin that
/// succeeds resets it.
class SpinGovernor {
 public:
  static constexpr int kMaxSkippedSpins = 256;

  /// `budget_us`: endpointSpinMicroseconds (0: never spins).
  explicit SpinGovernor(double budget_us) : budget_us_(budget_us) {}

  /// Calls `done()` (true: stop, something arrived or failed) with a pause between calls for up to the budget µs,
  /// unless spinning is off or backing off. Returns true when done() returned true; false: sleep now.
  template <typename Done>
  bool spin(Done done) {
    if (budget_us_ <= 0) return false;
    if (skip_ > 0) {
      --skip_;
      return false;
    }
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    const Clock::time_point end =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(budget_us_));
    bool found = false;
    for (unsigned i = 1;; ++i) {
      if (done()) {
        found = true;
        break;
      }
      if (i % 64 == 0 && Clock::now() >= end) break;
      cpuRelax();
    }
    record(found, std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    return found;
  }

  /// The bookkeeping of spin() (public for tests): a spin that found something within 2 x the budget µs of wall
  /// time resets the backoff; otherwise the next `backoff` spins are skipped and the backoff doubles.
  void record(bool found, double elapsed_us) {
    if (found && elapsed_us <= 2 * budget_us_) {
      backoff_ = 1;
      return;
    }
    skip_ = backoff_;
    backoff_ = std::min(2 * backoff_, kMaxSkippedSpins);
  }

  /// Blocking polls that will sleep at once before the next spin.
  int skipped() const { return skip_; }

 private:
  double budget_us_;
  int skip_ = 0;
  int backoff_ = 1;
};

/// One stage of a collective setup: every rank all-gathers whether its part (`mine`) worked, so that all ranks
/// fail together instead of some waiting for the timeout. Returns `mine` when it failed, kRemoteError
/// "<transport>: rank P could not <stage>" when rank P's failed, or the bootstrap's error.
Status agreeOnSetup(Bootstrap& bootstrap, const Status& mine, const char* transport, const char* stage);

/// kRemoteError "<transport>: rank R: <the bootstrap's report>" when bootstrap.checkPeers() reports a dead or
/// aborted peer (one system call), else ok.
Status bootstrapPeerFailure(Bootstrap& bootstrap, const char* transport, int rank);

/// The kTimeout of a blocking poll of rank `rank` that saw no completion for `waited_s` seconds, saying what it
/// waits for (`waiting_for`: "a message of 8 bytes from rank 1 on channel 0 ...").
Status noCompletionTimeout(const char* transport, int rank, double waited_s, const std::string& waiting_for);

/// Bookkeeping of one blocking poll that sleeps in slices of `slice_ms` (shm's futex, ucx's event fd): how long
/// it has waited, whether the timeout ran out, whether to ask the bootstrap about peers (at most once per slice;
/// the time of the last check is the endpoint's, kept across polls so that the first wait checks at once), and
/// how long to sleep next.
class BlockingWait {
 public:
  BlockingWait(double timeout_s, int slice_ms, std::chrono::steady_clock::time_point* last_peer_check);
  /// Reads the clock: once per round, after progressing.
  void tick();
  /// True at most once per slice (across polls) at the time of the last tick(): the round calls checkPeers().
  bool peerCheckDue();
  double waitedSeconds() const;
  bool expired() const { return waitedSeconds() >= timeout_s_; }
  /// The time left, clamped to [1, slice_ms] milliseconds.
  int sleepMs() const;

 private:
  const double timeout_s_;
  const int slice_ms_;
  std::chrono::steady_clock::time_point* last_peer_check_;
  const std::chrono::steady_clock::time_point begin_;
  std::chrono::steady_clock::time_point now_;
};

/// The lock an endpoint shares with its background progress thread (shm, ucx): every call of the owner holds
/// mutex() throughout (blocking polls included, through a CallGuard) and stamps when it returned; the thread
/// moves work on only once the owner has been out of the endpoint for kOwnerIdle, since the owner progresses
/// everything itself while it is inside.
class ProgressThread {
 public:
  static constexpr std::chrono::milliseconds kOwnerIdle{2};

  class CallGuard {
   public:
    explicit CallGuard(ProgressThread& progress) : progress_(progress), lock_(progress.mutex_) {}
    ~CallGuard() { progress_.last_call_end_ = std::chrono::steady_clock::now(); }

   private:
    ProgressThread& progress_;
    std::unique_lock<std::mutex> lock_;
  };

  std::mutex& mutex() { return mutex_; }
  bool running() const { return thread_.joinable(); }
  /// Starts the thread on `loop` (once).
  void start(std::function<void()> loop) { thread_ = std::thread(std::move(loop)); }
  /// Wakes the thread when it waits for work (new work was queued).
  void wake() { wake_.notify_one(); }
  /// Tells the thread to stop and joins it (nothing when it never started). The endpoint's destructor calls it
  /// before freeing what the thread touches.
  void stop();
  /// The thread's loop condition, with `lock` (on mutex()) held: waits until `has_work()` (evaluated under the
  /// lock) and the owner has been idle for kOwnerIdle; false once stop() was called.
  bool waitForWork(std::unique_lock<std::mutex>& lock, const std::function<bool()>& has_work);

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
  bool stop_ = false;
  std::chrono::steady_clock::time_point last_call_end_;
};

}  // namespace braid
