#include "braid_perf/shared_sync.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>

namespace braid::perf {
namespace {

timespec monotonicNow() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now;
}

double secondsSince(const timespec& start) {
  const timespec now = monotonicNow();
  return static_cast<double>(now.tv_sec - start.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec - start.tv_nsec);
}

// now + seconds on CLOCK_MONOTONIC.
timespec deadlineIn(double seconds) {
  timespec t = monotonicNow();
  const auto whole = static_cast<time_t>(seconds);
  t.tv_sec += whole;
  t.tv_nsec += static_cast<long>((seconds - static_cast<double>(whole)) * 1e9);
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

}  // namespace

Result<SharedState*> SharedState::create(int nranks) {
  if (nranks < 1 || nranks > kMaxRanks) {
    return invalidArgument("braid_perf supports 1 to " + std::to_string(kMaxRanks) + " ranks, not " +
                           std::to_string(nranks));
  }
  void* memory = mmap(nullptr, sizeof(SharedState), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    return Status(StatusCode::kSystemError, std::string("mmap of braid_perf's shared state: ") + std::strerror(errno));
  }
  SharedState* state = new (memory) SharedState();
  state->participants_ = nranks;
  pthread_mutexattr_t mutex_attr;
  pthread_mutexattr_init(&mutex_attr);
  pthread_mutexattr_setpshared(&mutex_attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&mutex_attr, PTHREAD_MUTEX_ROBUST);
  int rc = pthread_mutex_init(&state->mutex_, &mutex_attr);
  pthread_mutexattr_destroy(&mutex_attr);
  pthread_condattr_t cond_attr;
  pthread_condattr_init(&cond_attr);
  pthread_condattr_setpshared(&cond_attr, PTHREAD_PROCESS_SHARED);
  pthread_condattr_setclock(&cond_attr, CLOCK_MONOTONIC);
  if (rc == 0) rc = pthread_cond_init(&state->cond_, &cond_attr);
  pthread_condattr_destroy(&cond_attr);
  if (rc != 0) {
    munmap(memory, sizeof(SharedState));
    return Status(StatusCode::kSystemError, std::string("process-shared mutex/condition: ") + std::strerror(rc));
  }
  return state;
}

void SharedState::destroy(SharedState* state) {
  if (state) munmap(state, sizeof(SharedState));
}

void SharedState::lock() {
  const int rc = pthread_mutex_lock(&mutex_);
  if (rc == EOWNERDEAD) {
    // A process died holding the lock: the group cannot finish.
    aborted_ = 1;
    pthread_mutex_consistent(&mutex_);
  }
}

Status SharedState::barrier(double timeout_s) {
  const timespec start = monotonicNow();
  lock();
  if (aborted_) {
    pthread_mutex_unlock(&mutex_);
    return Status(StatusCode::kRemoteError, "another rank failed");
  }
  const uint64_t generation = generation_;
  if (++arrived_ == participants_) {
    arrived_ = 0;
    ++generation_;
    pthread_cond_broadcast(&cond_);
    pthread_mutex_unlock(&mutex_);
    return Status::ok();
  }
  while (generation_ == generation && !aborted_) {
    // Wake at least once a second: a launcher that saw a process die sets aborted_ and broadcasts, but a waiter
    // must not depend on that broadcast alone.
    const double left = timeout_s > 0 ? timeout_s - secondsSince(start) : 1.0;
    const timespec wake = deadlineIn(std::clamp(left, 0.001, 1.0));
    const int rc = pthread_cond_timedwait(&cond_, &mutex_, &wake);
    if (rc == EOWNERDEAD) {
      aborted_ = 1;
      pthread_mutex_consistent(&mutex_);
    }
    if (generation_ == generation && !aborted_ && timeout_s > 0 && secondsSince(start) > timeout_s) {
      aborted_ = 1;
      pthread_cond_broadcast(&cond_);
      pthread_mutex_unlock(&mutex_);
      return Status(StatusCode::kTimeout,
                    "the ranks did not all reach braid_perf's barrier within " + std::to_string(timeout_s) + " s (-T)");
    }
  }
  const bool passed = generation_ != generation;
  pthread_mutex_unlock(&mutex_);
  if (!passed) return Status(StatusCode::kRemoteError, "another rank failed");
  return Status::ok();
}

void SharedState::abort() {
  lock();
  aborted_ = 1;
  pthread_cond_broadcast(&cond_);
  pthread_mutex_unlock(&mutex_);
}

bool SharedState::aborted() const { return aborted_ != 0; }

Result<std::vector<double>> SharedState::exchange(int rank, double value, double timeout_s) {
  slots_[rank].value = value;
  BRAID_RETURN_IF_ERROR(barrier(timeout_s));
  std::vector<double> values(static_cast<size_t>(participants_));
  for (int r = 0; r < participants_; ++r) values[r] = slots_[r].value;
  BRAID_RETURN_IF_ERROR(barrier(timeout_s));
  return values;
}

Result<std::vector<int64_t>> SharedState::exchangeCount(int rank, int64_t value, double timeout_s) {
  slots_[rank].count = value;
  BRAID_RETURN_IF_ERROR(barrier(timeout_s));
  std::vector<int64_t> values(static_cast<size_t>(participants_));
  for (int r = 0; r < participants_; ++r) values[r] = slots_[r].count;
  BRAID_RETURN_IF_ERROR(barrier(timeout_s));
  return values;
}

}  // namespace braid::perf
