// The communicator across processes: every collective through braid::Communicator on
// forked processes over shared memory, TCP and UCX on loopback, checked against the naive reference of
// comm_test_util.h; and a rank killed with SIGKILL in the middle of a large all-reduce: every other rank returns
// an error well within the timeout and the test finishes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>

#include "comm/comm_test_util.h"
#include "transport/multirank.h"

namespace braid {
namespace {

using testing::checkCollective;
using testing::ForkShared;
using testing::Run;

struct Shape {
  CollectiveKind kind;
  int root;
};

int runAll(int rank, int n, const std::string& transport, ForkShared<UniqueId>& id) {
  Result<std::unique_ptr<Bootstrap>> bootstrap = testing::forkedBootstrap(id, rank, n, 20);
  if (!bootstrap.isOk()) {
    std::fprintf(stderr, "bootstrap: %s\n", bootstrap.status().toString().c_str());
    return 2;
  }
  CommOptions options;
  options.transport = transport;
  options.timeout_s = 20;
  Result<std::unique_ptr<Communicator>> comm = Communicator::create(std::move(bootstrap).value(), options);
  if (!comm.isOk()) {
    std::fprintf(stderr, "create: %s\n", comm.status().toString().c_str());
    return 3;
  }
  if (std::string((*comm)->transportName()) != transport) {
    std::fprintf(stderr, "transport %s, not %s\n", (*comm)->transportName(), transport.c_str());
    return 4;
  }
  const Shape shapes[] = {{CollectiveKind::kAllReduce, 0},     {CollectiveKind::kAllGather, 0},
                          {CollectiveKind::kReduceScatter, 0}, {CollectiveKind::kAllToAll, 0},
                          {CollectiveKind::kBroadcast, n - 1}, {CollectiveKind::kReduce, 1}};
  // Small and large counts (the classical rule switches algorithms at 256 KiB), both modes, a reduction
  // datatype/op pair per size.
  const Run runs[] = {{1, false, DataType::kFloat32, ReduceOp::kSum},
                      {7, true, DataType::kInt32, ReduceOp::kMax},
                      {1000, false, DataType::kFloat16, ReduceOp::kAvg},
                      {1000003, false, DataType::kFloat32, ReduceOp::kSum},
                      {1000003, true, DataType::kInt64, ReduceOp::kProd}};
  for (const Shape& shape : shapes) {
    for (const Run& run : runs) {
      const Status status = checkCollective(**comm, shape.kind, shape.root, transport, run);
      if (!status.isOk()) {
        std::fprintf(stderr, "%s\n", status.toString().c_str());
        return 5;
      }
    }
  }
  // All-to-allv with uneven blocks: rank r sends r + p + 1 floats to p.
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t s_total = 0, r_total = 0;
  for (int p = 0; p < n; ++p) {
    sc[p] = rank + p + 1;
    sd[p] = s_total;
    s_total += sc[p];
    rc[p] = p + rank + 1;
    rd[p] = r_total;
    r_total += rc[p];
  }
  std::vector<float> send(s_total), recv(r_total, -1);
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < sc[p]; ++k) send[sd[p] + k] = static_cast<float>(100 * rank + 10 * p + k);
  const Status v =
      (*comm)->allToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), DataType::kFloat32);
  if (!v.isOk()) {
    std::fprintf(stderr, "alltoallv: %s\n", v.toString().c_str());
    return 6;
  }
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < rc[p]; ++k)
      if (recv[rd[p] + k] != static_cast<float>(100 * p + 10 * rank + k)) return 7;
  return 0;
}

// Forking needs a single-threaded process (tests/transport/multirank.h). ctest runs every test in its own
// process; run as one binary, earlier tests (synthesis in Differential.Synthesized*) leave helper threads, and
// these tests say so instead of forking.
bool canFork() {
  for (int i = 0; i < 20 && testing::processThreadCount() > 1; ++i) usleep(100000);
  return testing::processThreadCount() == 1;
}
#define BRAID_REQUIRE_FORKABLE()                                       \
  if (!canFork())                                                      \
  GTEST_SKIP() << "this process has " << testing::processThreadCount() \
               << " threads left by earlier tests; run it alone (ctest runs each test in its own process)"

void everyCollective(const std::string& transport, int n) {
  ForkShared<UniqueId> id;
  const testing::ForkResult result = testing::runForked(
      n, [&](int rank) { return runAll(rank, n, transport, id); }, 120);
  EXPECT_TRUE(result.allOk()) << transport << " n=" << n << "\n" << result.summary();
}

TEST(MultiProcess, ShmEveryCollective) {
  BRAID_REQUIRE_FORKABLE();
  everyCollective("shm", 3);
}
TEST(MultiProcess, TcpEveryCollective) {
  BRAID_REQUIRE_FORKABLE();
  everyCollective("tcp", 3);
}
TEST(MultiProcess, UcxEveryCollective) {
  BRAID_REQUIRE_FORKABLE();
#ifndef BRAID_HAVE_UCX
  GTEST_SKIP() << "built without UCX";
#endif
  setenv("UCX_TLS", "tcp,self", 0);
  everyCollective("ucx", 3);
}

// Rank 2 of 4 dies (SIGKILL from the parent) while every rank loops over 32 MiB all-reduces; the others must
// return an error, not hang, well before the 60 s timeout.
void killedRank(const std::string& transport) {
  ForkShared<UniqueId> id;
  testing::ForkOptions fork_options;
  fork_options.kill_rank = 2;
  fork_options.kill_after_s = 1.5;
  const testing::ForkResult result = testing::runForked(
      4,
      [&](int rank) -> int {
        Result<std::unique_ptr<Bootstrap>> bootstrap = testing::forkedBootstrap(id, rank, 4, 20);
        if (!bootstrap.isOk()) return 2;
        CommOptions options;
        options.transport = transport;
        options.timeout_s = 60;
        Result<std::unique_ptr<Communicator>> comm = Communicator::create(std::move(bootstrap).value(), options);
        if (!comm.isOk()) return 3;
        std::vector<float> buf(8 << 20, 1.0f);
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < 100000; ++i) {
          const Status s = (*comm)->allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
          if (!s.isOk()) {
            const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            std::fprintf(stderr, "rank %d: error after %.1f s: %s\n", rank, waited, s.toString().c_str());
            return waited < 30 ? 0 : 8;  // an error, and well within the timeout
          }
        }
        return 9;  // never saw the death
      },
      90, fork_options);
  ASSERT_TRUE(result.error.empty()) << result.summary();
  for (const auto& r : result.ranks) {
    if (r.rank == 2) {
      EXPECT_EQ(r.signal, 9) << result.summary();
    } else {
      EXPECT_TRUE(r.ok()) << transport << ": rank " << r.rank << " " << r.describe() << "\n" << result.summary();
    }
  }
  EXPECT_LT(result.elapsed_s, 45.0);
}

TEST(MultiProcess, ShmKilledRankFailsTheOthers) {
  BRAID_REQUIRE_FORKABLE();
  killedRank("shm");
}
TEST(MultiProcess, TcpKilledRankFailsTheOthers) {
  BRAID_REQUIRE_FORKABLE();
  killedRank("tcp");
}
TEST(MultiProcess, UcxKilledRankFailsTheOthers) {
  BRAID_REQUIRE_FORKABLE();
#ifndef BRAID_HAVE_UCX
  GTEST_SKIP() << "built without UCX";
#endif
  setenv("UCX_TLS", "tcp,self", 0);
  killedRank("ucx");
}

}  // namespace
}  // namespace braid
