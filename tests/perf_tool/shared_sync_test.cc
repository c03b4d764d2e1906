// braid_perf's barrier and exchange across threads and forked processes; abort and -T release every waiter.
#include "braid_perf/shared_sync.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace braid::perf {
namespace {

TEST(PerfSharedSyncTest, ThreadsExchangeValues) {
  Result<SharedState*> state = SharedState::create(4);
  ASSERT_TRUE(state.isOk()) << state.status().toString();
  SharedState* s = *state;
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 0; round < 50; ++round) {
        Result<std::vector<double>> v = s->exchange(r, r * 10.0 + round, 5);
        if (!v.isOk() || v->size() != 4u) {
          ++bad;
          return;
        }
        for (int q = 0; q < 4; ++q) bad += (*v)[q] != q * 10.0 + round;
        Result<std::vector<int64_t>> c = s->exchangeCount(r, r + round, 5);
        if (!c.isOk()) {
          ++bad;
          return;
        }
        for (int q = 0; q < 4; ++q) bad += (*c)[q] != q + round;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  SharedState::destroy(s);
}

TEST(PerfSharedSyncTest, ForkedProcessesMeet) {
  Result<SharedState*> state = SharedState::create(3);
  ASSERT_TRUE(state.isOk());
  SharedState* s = *state;
  std::vector<pid_t> children;
  for (int r = 1; r < 3; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Result<std::vector<int64_t>> v = s->exchangeCount(r, 100 + r, 10);
      _exit(v.isOk() && (*v)[0] == 100 && (*v)[1] == 101 && (*v)[2] == 102 ? 0 : 1);
    }
    children.push_back(pid);
  }
  Result<std::vector<int64_t>> v = s->exchangeCount(0, 100, 10);
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_EQ((*v)[2], 102);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  SharedState::destroy(s);
}

TEST(PerfSharedSyncTest, AbortReleasesWaiters) {
  Result<SharedState*> state = SharedState::create(3);
  ASSERT_TRUE(state.isOk());
  SharedState* s = *state;
  Status first, second;
  std::thread a([&] { first = s->barrier(0); });
  std::thread b([&] { second = s->barrier(0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  s->abort();
  a.join();
  b.join();
  EXPECT_EQ(first.code(), StatusCode::kRemoteError);
  EXPECT_EQ(second.code(), StatusCode::kRemoteError);
  EXPECT_EQ(s->barrier(0).code(), StatusCode::kRemoteError);  // later ones fail at once
  SharedState::destroy(s);
}

TEST(PerfSharedSyncTest, TimeoutAbortsTheGroup) {
  Result<SharedState*> state = SharedState::create(2);
  ASSERT_TRUE(state.isOk());
  SharedState* s = *state;
  const auto start = std::chrono::steady_clock::now();
  const Status st = s->barrier(0.2);  // the other rank never comes
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(st.code(), StatusCode::kTimeout);
  EXPECT_NE(st.message().find("-T"), std::string::npos);
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 3.0);
  EXPECT_TRUE(s->aborted());
  SharedState::destroy(s);
  EXPECT_FALSE(SharedState::create(0).isOk());
  EXPECT_FALSE(SharedState::create(kMaxRanks + 1).isOk());
}

}  // namespace
}  // namespace braid::perf
