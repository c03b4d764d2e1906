// Synchronization of braid_perf's ranks, whether threads of one process or threads of forked processes: one
// anonymous shared mapping made before fork holds a barrier (a process-shared, robust pthread mutex and
// condition variable) and one slot per rank for the values the ranks exchange (pid, host, times, wrong counts).
// It is braid_perf's own bookkeeping, independent of the communicator under test (nccl-tests uses MPI and a
// pthread barrier for the same).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid::perf {

inline constexpr int kMaxRanks = 4096;

struct RankSlot {
  int64_t pid = 0;
  char host[64] = {};
  double value = 0;
  int64_t count = 0;
};

class SharedState {
 public:
  /// Maps the state for `nranks` participants (1..kMaxRanks). Errors: kSystemError naming the failed call.
  static Result<SharedState*> create(int nranks);
  /// Unmaps it (in each process that mapped it, after its last use).
  static void destroy(SharedState* state);

  /// Waits until all participants arrived. timeout_s <= 0: no limit. Errors: kRemoteError "another rank
  /// failed" once abort() was called (by any rank or the launcher); kTimeout after timeout_s (which also aborts,
  /// so that every waiter stops).
  Status barrier(double timeout_s);
  /// Makes every pending and later barrier() fail. Safe to call from any process of the group.
  void abort();
  bool aborted() const;

  RankSlot& slot(int rank) { return slots_[rank]; }
  int participants() const { return participants_; }

  /// Each rank publishes `value`; returns every rank's value (index = rank). Two barriers.
  Result<std::vector<double>> exchange(int rank, double value, double timeout_s);
  Result<std::vector<int64_t>> exchangeCount(int rank, int64_t value, double timeout_s);

 private:
  SharedState() = default;
  void lock();

  pthread_mutex_t mutex_;
  pthread_cond_t cond_;
  int participants_ = 0;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::atomic<int> aborted_{0};  // lock-free, so valid across processes
  RankSlot slots_[kMaxRanks];
};

}  // namespace braid::perf
