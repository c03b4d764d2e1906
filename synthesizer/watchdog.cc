// The synthesis watchdog (watchdog.h): deadline interrupts of registered Z3 contexts and progress heartbeats.
#include "synthesizer/watchdog.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace braid::synth {
namespace {

/// `seconds` as a clock duration, saturated at 1e8 s (a nanosecond count overflows near 9.2e9 s); NaN = 0.
Watchdog::Clock::duration toDuration(double seconds) {
  const double clamped = seconds > 0 ? std::min(seconds, 1e8) : 0.0;
  return std::chrono::duration_cast<Watchdog::Clock::duration>(std::chrono::duration<double>(clamped));
}

double secondsBetween(Watchdog::Clock::time_point a, Watchdog::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

Watchdog::Watchdog(Clock::time_point start, Clock::time_point deadline,
                   std::function<void(const SynthesisProgress&)> progress, double tick_s, double heartbeat_s,
                   double grace_s)
    : start_(start),
      deadline_(deadline),
      progress_(std::move(progress)),
      tick_(toDuration(std::max(0.001, tick_s))),
      heartbeat_(toDuration(std::max(0.001, heartbeat_s))),
      grace_(toDuration(std::max(0.0, grace_s))),
      last_report_(Clock::now()),
      last_stage_report_(last_report_),
      thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::report(const SynthesisProgress& progress) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = Clock::now();
  last_ = progress;
  last_.elapsed_seconds = secondsBetween(start_, now);
  have_last_ = true;
  last_report_ = last_stage_report_ = now;
  if (progress_) progress_(last_);
}

std::string Watchdog::stage() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return have_last_ ? last_.stage : std::string();
}

int Watchdog::interrupts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return interrupts_;
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, tick_, [this] { return stop_; });
    if (stop_) break;
    const auto now = Clock::now();
    for (const Entry& e : contexts_) {
      if (now >= e.deadline) {
        Z3_interrupt(e.context);
        ++interrupts_;
      }
    }
    if (progress_ && have_last_ && now - last_report_ >= heartbeat_) {
      SynthesisProgress beat = last_;
      beat.elapsed_seconds = secondsBetween(start_, now);
      const double silent = secondsBetween(last_stage_report_, now);
      beat.detail = fmt::format("{} (running {:.0f} s{})", last_.detail.empty() ? "working" : last_.detail, silent,
                                now >= deadline_ ? ", time limit reached: stopping" : "");
      last_report_ = now;
      progress_(beat);
    }
  }
}

Watchdog::SolverGuard::SolverGuard(Watchdog* watchdog, Z3_context context, Clock::time_point deadline)
    : watchdog_(watchdog) {
  if (!watchdog_) return;
  std::lock_guard<std::mutex> lock(watchdog_->mutex_);
  id_ = watchdog_->next_id_++;
  watchdog_->contexts_.push_back({id_, context, std::min(deadline, watchdog_->deadline_) + watchdog_->grace_});
}

Watchdog::SolverGuard::~SolverGuard() {
  if (!watchdog_) return;
  std::lock_guard<std::mutex> lock(watchdog_->mutex_);
  auto& v = watchdog_->contexts_;
  v.erase(std::remove_if(v.begin(), v.end(), [this](const Entry& e) { return e.id == id_; }), v.end());
}

}  // namespace braid::synth
