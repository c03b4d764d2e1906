// The synthesis watchdog: a thread that makes the request's time limit a wall-clock bound on solver calls and keeps
// progress flowing while one runs. Private to synthesizer/.
//
//   - Every Z3 context the stages create is registered (SolverGuard) with the deadline of the stage that owns it.
//     Each check carries the time left as its own timeout, so it normally ends by then; one still running
//     `grace_s` after that deadline (Z3 does not poll its timeout everywhere) is interrupted: the thread calls
//     Z3_interrupt on the context every tick until it is unregistered. An interrupt leaves the context cancelled
//     (a later push throws z3::exception "canceled"), so the stages treat a Z3 exception after their deadline as
//     the end of their search and keep their best so far.
//   - Progress reports of the stages pass through report() (one mutex: the caller's callback never runs twice at
//     once). When none came for `heartbeat_s`, the thread repeats the last one with the seconds it has been running
//     ("routing: bisection 3: T <= 812 us (running 4 s)"), once per `heartbeat_s`.
#pragma once

#include <z3.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "braid/synthesize.h"

namespace braid::synth {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  /// Starts the thread. `progress` may be empty (then only interrupts happen). `tick_s`: how often the thread
  /// wakes (interrupt latency), `heartbeat_s`: silence before a repeated progress line, `grace_s`: how long after
  /// its deadline a context's check may still run before it is interrupted.
  Watchdog(Clock::time_point start, Clock::time_point deadline, std::function<void(const SynthesisProgress&)> progress,
           double tick_s = 0.1, double heartbeat_s = 1.0, double grace_s = 0.5);
  /// Stops and joins the thread. Every SolverGuard must be gone by then.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Passes a report to the callback (serialized), fills elapsed_seconds, remembers it for heartbeats.
  void report(const SynthesisProgress& progress);

  /// The stage of the last report ("" before the first).
  std::string stage() const;
  /// Number of Z3_interrupt calls made so far (each repeat counts).
  int interrupts() const;
  Clock::time_point deadline() const { return deadline_; }

  /// Registers a Z3 context until destroyed; it is interrupted from min(`deadline`, the watchdog's deadline) +
  /// grace on.
  /// A null watchdog makes the guard do nothing.
  class SolverGuard {
   public:
    SolverGuard(Watchdog* watchdog, Z3_context context, Clock::time_point deadline);
    ~SolverGuard();
    SolverGuard(const SolverGuard&) = delete;
    SolverGuard& operator=(const SolverGuard&) = delete;

   private:
    Watchdog* watchdog_;
    int id_ = -1;
  };

 private:
  struct Entry {
    int id;
    Z3_context context;
    Clock::time_point deadline;
  };
  void run();

  const Clock::time_point start_;
  const Clock::time_point deadline_;
  const std::function<void(const SynthesisProgress&)> progress_;
  const Clock::duration tick_;
  const Clock::duration heartbeat_;
  const Clock::duration grace_;
  mutable std::mutex mutex_;  // guards everything below and serializes progress_
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<Entry> contexts_;
  int next_id_ = 0;
  int interrupts_ = 0;
  bool have_last_ = false;
  SynthesisProgress last_;               // the last report of a stage (not a heartbeat)
  Clock::time_point last_report_;        // when the last line (report or heartbeat) went out
  Clock::time_point last_stage_report_;  // when `last_` came
  std::thread thread_;                   // last: started once everything above is initialized
};

}  // namespace braid::synth
