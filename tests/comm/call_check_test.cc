// The communicator's call check (comm/README.md) on every transport built: ranks that call a collective with
// different roots, counts, datatypes, reduction ops or collectives all fail with the same message naming the
// difference, nothing is left behind, and the next, matching call succeeds with the right result; all-to-all-v
// pairs whose byte counts disagree fail on every rank, naming both totals. Threads: ranks are threads of this
// process; shm, tcp, ucx: one forked process per rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "comm/comm_test_util.h"
#include "transport/multirank.h"

namespace braid {
namespace {

constexpr int kRanks = 3;

// `status` failed with kInvalidArgument and its message holds every text of `texts`; else an error saying what.
Status expectRefused(const Status& status, const char* what, const std::vector<std::string>& texts) {
  bool ok = !status.isOk() && status.code() == StatusCode::kInvalidArgument;
  for (const std::string& text : texts) ok = ok && status.message().find(text) != std::string::npos;
  if (ok) return Status::ok();
  return internalError(fmt::format("{}: expected kInvalidArgument with the mismatch, got: {}", what,
                                   status.isOk() ? "success" : status.toString()));
}

// A matching all-reduce of 1000 floats (rank r contributes r + 1 + i % 5) must succeed with the exact sums.
Status expectCorrectAllReduce(Communicator& comm, const char* after) {
  const int n = comm.size();
  std::vector<float> buf(1000);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(comm.rank() + 1 + static_cast<int>(i % 5));
  const Status status = comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
  if (!status.isOk()) return Status(status.code(), fmt::format("the all-reduce after {}: {}", after, status.message()));
  for (size_t i = 0; i < buf.size(); ++i) {
    const float want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 5));
    if (buf[i] != want) {
      return internalError(
          fmt::format("the all-reduce after {}: element {} is {}, expected {}", after, i, buf[i], want));
    }
  }
  return Status::ok();
}

Status unrootedMismatchesFail(Communicator& comm);

// Every mismatch in turn, each followed by a matching all-reduce; then a matching broadcast. `every_collective`:
// BRAID_CALL_CHECK=all, so the unrooted mismatches (count, datatype, op, collective) are checked too; else only
// broadcast's root (the default, `rooted`).
Status mismatchesFailEveryRank(Communicator& comm, bool every_collective) {
  const int r = comm.rank();
  // Broadcast with root = own rank on rank 1 (root 0 elsewhere), small and large (other algorithms).
  for (size_t count : {size_t{8}, size_t{200000}}) {
    std::vector<float> data(count, static_cast<float>(r));
    const int root = r == 1 ? 1 : 0;
    BRAID_RETURN_IF_ERROR(expectRefused(comm.broadcast(data.data(), data.data(), count, DataType::kFloat32, root),
                                        "broadcast with mismatched roots",
                                        {"rank 1 called broadcast with root 1, rank 0 with root 0"}));
    BRAID_RETURN_IF_ERROR(expectCorrectAllReduce(comm, "mismatched broadcast roots"));
  }
  if (every_collective) BRAID_RETURN_IF_ERROR(unrootedMismatchesFail(comm));
  // A matching broadcast from rank 2 still delivers rank 2's data.
  std::vector<float> data(1000, static_cast<float>(r * 10));
  BRAID_RETURN_IF_ERROR(comm.broadcast(data.data(), data.data(), data.size(), DataType::kFloat32, 2));
  for (float v : data)
    if (v != 20.0f) return internalError(fmt::format("rank {}: the broadcast from rank 2 delivered {}", r, v));
  return Status::ok();
}

// Mismatched counts, datatypes, ops and collectives of all-reduce, each followed by a matching all-reduce.
Status unrootedMismatchesFail(Communicator& comm) {
  const int r = comm.rank();
  std::vector<float> buf(4096, static_cast<float>(r));
  std::vector<float> out(4096 * kRanks);
  // Counts.
  BRAID_RETURN_IF_ERROR(expectRefused(
      comm.allReduce(buf.data(), buf.data(), r == 2 ? 100 : 64, DataType::kFloat32, ReduceOp::kSum),
      "all-reduce with mismatched counts", {"rank 2 called allreduce with count 100, rank 0 with count 64"}));
  BRAID_RETURN_IF_ERROR(expectCorrectAllReduce(comm, "mismatched counts"));
  // Datatypes of the same size (the bytes would match: the result would be silently wrong).
  BRAID_RETURN_IF_ERROR(expectRefused(
      comm.allReduce(buf.data(), buf.data(), 64, r == 1 ? DataType::kInt32 : DataType::kFloat32, ReduceOp::kSum),
      "all-reduce with mismatched datatypes",
      {"rank 1 called allreduce with datatype int32, rank 0 with datatype float"}));
  BRAID_RETURN_IF_ERROR(expectCorrectAllReduce(comm, "mismatched datatypes"));
  // Reduction ops.
  BRAID_RETURN_IF_ERROR(expectRefused(
      comm.allReduce(buf.data(), buf.data(), 64, DataType::kFloat32, r == 2 ? ReduceOp::kMax : ReduceOp::kSum),
      "all-reduce with mismatched ops", {"rank 2 called allreduce with op max, rank 0 with op sum"}));
  BRAID_RETURN_IF_ERROR(expectCorrectAllReduce(comm, "mismatched ops"));
  // Collectives: all-gather on rank 1, all-reduce elsewhere.
  const Status mixed = r == 1 ? comm.allGather(buf.data(), out.data(), 64, DataType::kFloat32)
                              : comm.allReduce(buf.data(), buf.data(), 64, DataType::kFloat32, ReduceOp::kSum);
  BRAID_RETURN_IF_ERROR(expectRefused(mixed, "mismatched collectives", {"rank 1 called allgather, rank 0 allreduce"}));
  return expectCorrectAllReduce(comm, "mismatched collectives");
}

// All-to-all-v: rank 0 sends 1 MiB to rank 1, which expects 659968 bytes; every rank fails naming both totals
// (in the slices' place), then a matching all-to-all-v and all-reduce succeed.
Status allToAllvTotalsFailEveryRank(Communicator& comm) {
  const int r = comm.rank();
  const size_t big = 1048576 / 4;
  std::vector<size_t> sc(kRanks, 16), rc(kRanks, 16), sd(kRanks), rd(kRanks);
  if (r == 0) sc[1] = big;
  if (r == 1) rc[0] = 659968 / 4;
  size_t s_total = 0, r_total = 0;
  for (int p = 0; p < kRanks; ++p) {
    sd[p] = s_total;
    s_total += sc[p];
    rd[p] = r_total;
    r_total += rc[p];
  }
  std::vector<float> send(s_total, 1.0f), recv(r_total, 0.0f);
  BRAID_RETURN_IF_ERROR(expectRefused(
      comm.allToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), DataType::kFloat32),
      "alltoallv with mismatched sizes",
      {"rank 0 sends 1048576 bytes to rank 1, rank 1 expects 659968 bytes from rank 0"}));
  std::vector<size_t> even(kRanks, 16), displs(kRanks);
  for (int p = 0; p < kRanks; ++p) displs[p] = 16 * p;
  std::vector<float> s2(16 * kRanks), r2(16 * kRanks, -1.0f);
  for (size_t i = 0; i < s2.size(); ++i) s2[i] = static_cast<float>(100 * r + static_cast<int>(i / 16));
  BRAID_RETURN_IF_ERROR(
      comm.allToAllv(s2.data(), even.data(), displs.data(), r2.data(), even.data(), displs.data(), DataType::kFloat32));
  for (size_t i = 0; i < r2.size(); ++i) {
    const float want = static_cast<float>(100 * static_cast<int>(i / 16) + r);
    if (r2[i] != want) return internalError(fmt::format("rank {}: alltoallv element {} is {}", r, i, r2[i]));
  }
  return expectCorrectAllReduce(comm, "a mismatched alltoallv");
}

void onTransport(const std::string& transport, const std::function<Status(Communicator&)>& body) {
  CommOptions options;
  options.transport = transport;
  options.timeout_s = 30;
  if (transport == "threads") {
    const Status status = testing::runRanks(kRanks, options, body);
    EXPECT_TRUE(status.isOk()) << status.toString();
    return;
  }
#ifndef BRAID_HAVE_UCX
  if (transport == "ucx") GTEST_SKIP() << "built without UCX";
#endif
  if (transport == "ucx") setenv("UCX_TLS", "tcp,self", 0);
  for (int i = 0; i < 20 && testing::processThreadCount() > 1; ++i) usleep(100000);
  if (testing::processThreadCount() > 1) GTEST_SKIP() << "this process has threads left by earlier tests";
  testing::ForkShared<UniqueId> id;
  const testing::ForkResult result = testing::runForked(
      kRanks,
      [&](int rank) -> int {
        Result<std::unique_ptr<Bootstrap>> bootstrap = testing::forkedBootstrap(id, rank, kRanks, 20);
        if (!bootstrap.isOk()) return 2;
        Result<std::unique_ptr<Communicator>> comm = Communicator::create(std::move(bootstrap).value(), options);
        if (!comm.isOk()) {
          std::fprintf(stderr, "create: %s\n", comm.status().toString().c_str());
          return 3;
        }
        const Status status = body(**comm);
        if (!status.isOk()) std::fprintf(stderr, "rank %d: %s\n", rank, status.toString().c_str());
        return status.isOk() ? 0 : 1;
      },
      120);
  EXPECT_TRUE(result.allOk()) << transport << "\n" << result.summary();
}

class CallCheck : public ::testing::TestWithParam<const char*> {};

// BRAID_CALL_CHECK set to `value` (unset when null) for the scope; forked ranks inherit it.
class ScopedCallCheck {
 public:
  explicit ScopedCallCheck(const char* value) {
    if (value) {
      setenv("BRAID_CALL_CHECK", value, 1);
    } else {
      unsetenv("BRAID_CALL_CHECK");
    }
  }
  ~ScopedCallCheck() { unsetenv("BRAID_CALL_CHECK"); }
};

TEST_P(CallCheck, DefaultChecksRootedCallsAndLeavesNothingBehind) {
  ScopedCallCheck env(nullptr);
  onTransport(GetParam(), [](Communicator& comm) { return mismatchesFailEveryRank(comm, false); });
}

TEST_P(CallCheck, AllChecksEveryCollectiveAndLeavesNothingBehind) {
  ScopedCallCheck env("all");
  onTransport(GetParam(), [](Communicator& comm) { return mismatchesFailEveryRank(comm, true); });
}

TEST(CallCheckSetting, UnknownValueIsAnErrorNamingTheVariable) {
  ScopedCallCheck env("sometimes");
  CommOptions options;
  options.transport = "threads";
  const Status status = testing::runRanks(2, options, [](Communicator&) { return Status::ok(); });
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.toString();
  EXPECT_NE(status.message().find("BRAID_CALL_CHECK=sometimes: not one of rooted, all, off"), std::string::npos)
      << status.toString();
}

// BRAID_CALL_CHECK differs between rank processes: every rank fails at init naming the variable and both values
// (without the check, the ranks that check a call wait for call records the others never send, until the timeout).
TEST(CallCheckSetting, DifferingValuesBetweenRanksFailInitNamingTheVariable) {
  for (int i = 0; i < 20 && testing::processThreadCount() > 1; ++i) usleep(100000);
  if (testing::processThreadCount() > 1) GTEST_SKIP() << "this process has threads left by earlier tests";
  testing::ForkShared<UniqueId> id;
  const testing::ForkResult result = testing::runForked(
      2,
      [&](int rank) -> int {
        if (rank == 1) setenv("BRAID_CALL_CHECK", "all", 1);
        Result<std::unique_ptr<Bootstrap>> bootstrap = testing::forkedBootstrap(id, rank, 2, 20);
        if (!bootstrap.isOk()) return 2;
        CommOptions options;
        options.transport = "tcp";
        options.timeout_s = 20;
        Result<std::unique_ptr<Communicator>> comm = Communicator::create(std::move(bootstrap).value(), options);
        if (comm.isOk()) return 3;
        const std::string want =
            rank == 0 ? "rank 0: BRAID_CALL_CHECK differs between ranks: rank 1 has 'all', rank 0 has 'rooted'"
                      : "rank 1: BRAID_CALL_CHECK differs between ranks: rank 0 has 'rooted', rank 1 has 'all'";
        std::fprintf(stderr, "%s\n", comm.status().toString().c_str());
        return comm.status().code() == StatusCode::kInvalidUsage && comm.status().message().rfind(want, 0) == 0 ? 0 : 4;
      },
      60);
  EXPECT_TRUE(result.allOk()) << result.summary();
  EXPECT_LT(result.elapsed_s, 15) << result.summary();
}

TEST_P(CallCheck, AllToAllvSizeMismatchNamesBothTotalsOnEveryRank) {
  onTransport(GetParam(), allToAllvTotalsFailEveryRank);
}

INSTANTIATE_TEST_SUITE_P(Transports, CallCheck, ::testing::Values("threads", "shm", "tcp", "ucx"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace braid
