// braidCommDestroy per transport (threads, shm, tcp, and ucx when built), ranks as threads of this process: one
// thread destroying every rank's communicator one after another (the others idle, already destroyed or still to
// come), and every rank's thread destroying its own as soon as its last collective returned (peers possibly still
// receiving its data). Each destroy must take well under a second and no rank may see its last collective fail.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"

namespace braid {
namespace {

class Destroy : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string transport = GetParam();
#ifndef BRAID_HAVE_UCX
    if (transport == "ucx") GTEST_SKIP() << "built without UCX";
#endif
    if (transport == "ucx") setenv("UCX_TLS", "tcp,self", 0);
    setenv("BRAID_TRANSPORT", transport.c_str(), 1);
  }
  void TearDown() override { unsetenv("BRAID_TRANSPORT"); }
};

// Element i of rank r's input; the sum over n ranks is n * i + n * (n - 1) / 2, exact in float for these sizes.
float input(int rank, size_t i) { return static_cast<float>(rank) + static_cast<float>(i % 1024); }
float expectedSum(int n, size_t i) {
  return static_cast<float>(n) * static_cast<float>(i % 1024) + static_cast<float>(n * (n - 1) / 2);
}

// Creates n communicators on n threads (braidCommInitRank), runs one float all-reduce of `count` elements on each,
// then either destroys each on its own thread right after its all-reduce (`own_thread`) or joins and hands them back.
// `wrong` counts wrong elements over all ranks; `results` gets each rank's all-reduce result.
std::vector<braidComm_t> runAllReduce(int n, size_t count, bool own_thread, std::vector<braidResult_t>* results,
                                      std::vector<double>* destroy_s, long* wrong) {
  braidUniqueId id{};
  EXPECT_EQ(braidGetUniqueId(&id), braidSuccess) << braidGetLastError(nullptr);
  std::vector<braidComm_t> comms(static_cast<size_t>(n), nullptr);
  results->assign(static_cast<size_t>(n), braidInternalError);
  destroy_s->assign(static_cast<size_t>(n), 0.0);
  std::vector<long> wrong_by_rank(static_cast<size_t>(n), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const size_t rank = static_cast<size_t>(r);
      if (braidCommInitRank(&comms[rank], n, id, r) != braidSuccess) {
        std::fprintf(stderr, "rank %d: %s\n", r, braidGetLastError(nullptr));
        return;
      }
      std::vector<float> buf(count);
      for (size_t i = 0; i < count; ++i) buf[i] = input(r, i);
      (*results)[rank] = braidAllReduce(buf.data(), buf.data(), count, braidFloat, braidSum, comms[rank], nullptr);
      if ((*results)[rank] != braidSuccess) {
        std::fprintf(stderr, "rank %d: %s\n", r, braidGetLastError(comms[rank]));
      }
      for (size_t i = 0; i < count; ++i) wrong_by_rank[rank] += buf[i] != expectedSum(n, i) ? 1 : 0;
      if (own_thread) {
        const auto start = std::chrono::steady_clock::now();
        EXPECT_EQ(braidCommDestroy(comms[rank]), braidSuccess) << "rank " << r;
        (*destroy_s)[rank] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        comms[rank] = nullptr;
      }
    });
  }
  for (auto& t : threads) t.join();
  *wrong = 0;
  for (long w : wrong_by_rank) *wrong += w;
  return comms;
}

TEST_P(Destroy, OneThreadDestroysEveryRankQuickly) {
  for (int n : {2, 4}) {
    std::vector<braidResult_t> results;
    std::vector<double> destroy_s;
    long wrong = 0;
    std::vector<braidComm_t> comms = runAllReduce(n, 4096, /*own_thread=*/false, &results, &destroy_s, &wrong);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(results[static_cast<size_t>(r)], braidSuccess) << n << " ranks, rank " << r;
      ASSERT_NE(comms[static_cast<size_t>(r)], nullptr) << n << " ranks, rank " << r;
    }
    EXPECT_EQ(wrong, 0) << n << " ranks";
    for (int r = 0; r < n; ++r) {
      const auto start = std::chrono::steady_clock::now();
      EXPECT_EQ(braidCommDestroy(comms[static_cast<size_t>(r)]), braidSuccess) << n << " ranks, rank " << r;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%s, %d ranks: destroying rank %d took %.3f s\n", GetParam(), n, r, seconds);
      EXPECT_LT(seconds, 1.0) << GetParam() << ", " << n << " ranks: destroying rank " << r;
    }
  }
}

// The last all-reduce's data is large enough (16 MiB per rank) that a rank returning from it early still has peers
// receiving from it when it destroys its communicator: they must still complete correctly.
TEST_P(Destroy, EachRankDestroysRightAfterItsLastCall) {
  const int n = 3;
  std::vector<braidResult_t> results;
  std::vector<double> destroy_s;
  long wrong = 0;
  runAllReduce(n, size_t{4} << 20, /*own_thread=*/true, &results, &destroy_s, &wrong);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[static_cast<size_t>(r)], braidSuccess) << "rank " << r;
    std::printf("%s: rank %d destroyed its communicator in %.3f s\n", GetParam(), r, destroy_s[static_cast<size_t>(r)]);
    EXPECT_LT(destroy_s[static_cast<size_t>(r)], 5.0) << GetParam() << ": rank " << r;
  }
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, Destroy, ::testing::Values("threads", "shm", "tcp", "ucx"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace braid
