// All-to-all and all-to-all-v through the communicator, flat and 2DH (Tutel's two-dimensional hierarchical
// exchange, comm/README.md): uneven, zero and single-peer splits, a rank that sends nothing and one that receives
// nothing, blocks larger than a slice, blocks packed in peer order and in reverse order with gaps, on 3, 8 and 16
// ranks as threads and as processes over shared memory and TCP; every element depends on (sender, receiver,
// position) and is checked against the definition, and nothing outside the receive blocks is written. Mismatched
// splits between two ranks fail on every rank naming both, within the timeout. The node shape (topology, ranks per
// node, hosts) and the choice between flat and 2DH (the simulator on the topology; forced by BRAID_ALLTOALL).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "braid/classic.h"
#include "braid/simulate.h"
#include "comm/alltoall_choice.h"
#include "comm/alltoallv_plan.h"
#include "comm/comm_test_util.h"
#include "common/log.h"
#include "transport/multirank.h"

namespace braid {
namespace {

// The value of element k of the block rank `src` sends rank `dst` (stored with the datatype's width).
int64_t valueOf(int src, int dst, uint64_t k) {
  return static_cast<int64_t>(src) * 1000003 + static_cast<int64_t>(dst) * 1009 + static_cast<int64_t>(k);
}

enum class Splits { kUneven, kZeros, kSinglePeer, kSilentRank, kDeafRank, kLarge };
const char* splitsName(Splits s) {
  switch (s) {
    case Splits::kUneven: return "uneven";
    case Splits::kZeros: return "zeros";
    case Splits::kSinglePeer: return "single-peer";
    case Splits::kSilentRank: return "silent rank 1";
    case Splits::kDeafRank: return "deaf last rank";
    case Splits::kLarge: return "blocks above a slice";
  }
  return "?";
}
constexpr Splits kAllSplits[] = {Splits::kUneven,     Splits::kZeros,    Splits::kSinglePeer,
                                 Splits::kSilentRank, Splits::kDeafRank, Splits::kLarge};

// Elements rank `src` sends rank `dst` (every rank computes the same matrix, so the splits agree pairwise).
uint64_t countOf(Splits s, int n, int src, int dst) {
  switch (s) {
    case Splits::kUneven: return static_cast<uint64_t>((src * 7 + dst * 3 + 1) % 11);
    case Splits::kZeros: return (src + dst) % 3 == 0 ? 0 : 1 + static_cast<uint64_t>((src * 5 + dst) % 4);
    case Splits::kSinglePeer: return dst == (src + 1) % n ? 9 + static_cast<uint64_t>(src) : 0;
    case Splits::kSilentRank: return src == 1 % n ? 0 : 2 + static_cast<uint64_t>((src + dst) % 5);
    case Splits::kDeafRank: return dst == n - 1 ? 0 : 2 + static_cast<uint64_t>((src * 3 + dst) % 5);
    case Splits::kLarge:  // 70000 elements of 8 bytes: 560000 B, above the 524288 B slice
      return (src == 0 && dst == n - 1) || (src == n - 1 && dst == 1 % n) ? 70000
                                                                          : static_cast<uint64_t>((src + dst) % 4);
  }
  return 0;
}

// Displacements: blocks in peer order back to back, or in reverse peer order with a gap of 3 elements after each.
std::vector<size_t> displacements(const std::vector<size_t>& counts, bool reversed, size_t* total) {
  const int n = static_cast<int>(counts.size());
  std::vector<size_t> displs(n);
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    const int p = reversed ? n - 1 - i : i;
    displs[p] = at;
    at += counts[p] + (reversed ? 3 : 0);
  }
  *total = at;
  return displs;
}

constexpr uint8_t kUntouched = 0xA5;
constexpr size_t kGuardElements = 16;

// One all-to-all-v on this rank with the given splits and layout: checks every received element and that no byte
// outside the receive blocks changed.
Status checkAllToAllv(Communicator& comm, Splits splits, bool reversed, DataType type) {
  const int n = comm.size();
  const int r = comm.rank();
  const uint64_t esz = dataTypeSize(type);
  std::vector<size_t> sc(n), rc(n);
  for (int p = 0; p < n; ++p) {
    sc[p] = countOf(splits, n, r, p);
    rc[p] = countOf(splits, n, p, r);
  }
  size_t s_total = 0, r_total = 0;
  const std::vector<size_t> sd = displacements(sc, reversed, &s_total);
  const std::vector<size_t> rd = displacements(rc, reversed, &r_total);
  std::vector<uint8_t> send((s_total + kGuardElements) * esz, kUntouched);
  std::vector<uint8_t> recv((r_total + kGuardElements) * esz, kUntouched);
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < sc[p]; ++k) testing::storeValue(send.data() + (sd[p] + k) * esz, type, valueOf(r, p, k));
  const std::string what = fmt::format("alltoallv {} {} {} n={} rank {}", splitsName(splits),
                                       reversed ? "reversed with gaps" : "packed", dataTypeName(type), n, r);
  const Status status = comm.allToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), type);
  if (!status.isOk()) return Status(status.code(), what + ": " + status.message());
  std::vector<bool> inside(recv.size() / esz, false);
  std::vector<uint8_t> want(esz);
  for (int p = 0; p < n; ++p) {
    for (size_t k = 0; k < rc[p]; ++k) {
      testing::storeValue(want.data(), type, valueOf(p, r, k));
      if (std::memcmp(want.data(), recv.data() + (rd[p] + k) * esz, esz) != 0) {
        return internalError(fmt::format("{}: element {} of the block from rank {} differs", what, k, p));
      }
      inside[rd[p] + k] = true;
    }
  }
  for (size_t e = 0; e < inside.size(); ++e) {
    if (inside[e]) continue;
    for (uint64_t b = 0; b < esz; ++b) {
      if (recv[e * esz + b] != kUntouched) {
        return internalError(fmt::format("{}: element {} outside every receive block was written", what, e));
      }
    }
  }
  return Status::ok();
}

// Every split and layout, int64 (the large blocks) and one narrower type, then fixed all-to-alls.
Status allSplits(Communicator& comm) {
  for (Splits s : kAllSplits) {
    for (bool reversed : {false, true}) BRAID_RETURN_IF_ERROR(checkAllToAllv(comm, s, reversed, DataType::kInt64));
  }
  BRAID_RETURN_IF_ERROR(checkAllToAllv(comm, Splits::kUneven, true, DataType::kInt32));
  BRAID_RETURN_IF_ERROR(checkAllToAllv(comm, Splits::kZeros, false, DataType::kUint8));
  // Fixed all-to-all (the 2dh or direct IR algorithm, lowered), whole-buffer counts as in the differential tests.
  const int n = comm.size();
  for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7} * n, uint64_t{1001} * n}) {
    for (bool in_place : {false, true}) {
      BRAID_RETURN_IF_ERROR(testing::checkCollective(comm, CollectiveKind::kAllToAll, 0, "alltoall",
                                                     testing::Run{count, in_place, DataType::kInt32, ReduceOp::kSum}));
    }
  }
  return Status::ok();
}

// The all-to-all the communicator picks is the mode's: 2dh_alltoall_n<n> or direct_alltoall_n<n>.
Status expectAllToAllAlgorithm(Communicator& comm, bool two_dim) {
  const std::string want = fmt::format("{}_alltoall_n{}", two_dim ? "2dh" : "direct", comm.size());
  for (bool in_place : {false, true}) {
    BRAID_ASSIGN_OR_RETURN(AlgorithmChoice choice,
                           comm.choose(CollectiveKind::kAllToAll, uint64_t{4096} * comm.size(), in_place));
    if (choice.algorithm != want) return internalError(fmt::format("chose {}, not {}", choice.algorithm, want));
  }
  return Status::ok();
}

CommOptions modeOptions(const std::string& transport, const std::string& mode, int ranks_per_node) {
  CommOptions options;
  options.transport = transport;
  options.alltoall = mode;
  options.ranks_per_node = ranks_per_node;
  options.timeout_s = 30;
  return options;
}

void onThreads(int n, const std::string& mode, int ranks_per_node) {
  const CommOptions options = modeOptions("threads", mode, ranks_per_node);
  const Status status = testing::runRanks(n, options, [&](Communicator& comm) -> Status {
    BRAID_RETURN_IF_ERROR(expectAllToAllAlgorithm(comm, mode == "2dh"));
    return allSplits(comm);
  });
  EXPECT_TRUE(status.isOk()) << mode << " n=" << n << " ranks per node " << ranks_per_node << ": " << status.toString();
}

TEST(AllToAllvThreads, ThreeRanks) {
  onThreads(3, "flat", 0);
  onThreads(3, "2dh", 3);  // one node: 2DH is the direct exchange inside it
  onThreads(3, "2dh", 1);  // one rank per node
}
TEST(AllToAllvThreads, EightRanks) {
  onThreads(8, "flat", 4);
  onThreads(8, "2dh", 4);
  onThreads(8, "2dh", 2);
}
TEST(AllToAllvThreads, SixteenRanks) {
  onThreads(16, "flat", 0);
  onThreads(16, "2dh", 8);
  onThreads(16, "2dh", 4);
}

// With the call check off: 2DH's exchange of block sizes, and in auto mode on a topology the round of totals the
// choice needs, run without it, and the data is right.
TEST(AllToAllvThreads, WithoutTheCallCheck) {
  setenv("BRAID_CALL_CHECK", "off", 1);
  onThreads(8, "2dh", 4);
  CommOptions options = modeOptions("threads", "auto", 0);
  options.topology = "dgx-h100-x2";
  const Status status = testing::runRanks(16, options, [](Communicator& comm) -> Status {
    for (Splits s : {Splits::kUneven, Splits::kLarge})
      BRAID_RETURN_IF_ERROR(checkAllToAllv(comm, s, true, DataType::kInt64));
    return Status::ok();
  });
  unsetenv("BRAID_CALL_CHECK");
  EXPECT_TRUE(status.isOk()) << status.toString();
}

// Forked processes over shared memory or TCP (a process that has threads cannot fork: ctest runs each test alone).
void onProcesses(const std::string& transport, int n, const std::string& mode, int ranks_per_node) {
  for (int i = 0; i < 20 && testing::processThreadCount() > 1; ++i) usleep(100000);
  if (testing::processThreadCount() > 1) GTEST_SKIP() << "this process has threads left by earlier tests";
  const CommOptions options = modeOptions(transport, mode, ranks_per_node);
  testing::ForkShared<UniqueId> id;
  const testing::ForkResult result = testing::runForked(
      n,
      [&](int rank) -> int {
        Result<std::unique_ptr<Bootstrap>> bootstrap = testing::forkedBootstrap(id, rank, n, 30);
        if (!bootstrap.isOk()) return 2;
        Result<std::unique_ptr<Communicator>> comm = Communicator::create(std::move(bootstrap).value(), options);
        if (!comm.isOk()) {
          std::fprintf(stderr, "create: %s\n", comm.status().toString().c_str());
          return 3;
        }
        Status status = expectAllToAllAlgorithm(**comm, mode == "2dh");
        if (status.isOk()) status = allSplits(**comm);
        if (!status.isOk()) std::fprintf(stderr, "rank %d: %s\n", rank, status.toString().c_str());
        return status.isOk() ? 0 : 1;
      },
      180);
  EXPECT_TRUE(result.allOk()) << transport << " " << mode << " n=" << n << "\n" << result.summary();
}

TEST(AllToAllvProcesses, ShmTwoDimSixteenRanks) { onProcesses("shm", 16, "2dh", 8); }
TEST(AllToAllvProcesses, ShmFlatEightRanks) { onProcesses("shm", 8, "flat", 0); }
TEST(AllToAllvProcesses, TcpTwoDimEightRanks) { onProcesses("tcp", 8, "2dh", 4); }
TEST(AllToAllvProcesses, TcpTwoDimThreeRanks) { onProcesses("tcp", 3, "2dh", 1); }

// Rank 2 sends 5 int64 to rank 6 (another node of 2 x 4), which expects 4: every rank fails naming both ranks and
// both byte counts, well within the timeout, and a matching call afterwards succeeds.
Status mismatchFailsEveryRank(Communicator& comm) {
  const int n = comm.size();
  const int r = comm.rank();
  std::vector<size_t> sc(n, 3), rc(n, 3), sd(n), rd(n);
  if (r == 2) sc[6] = 5;
  if (r == 6) rc[2] = 4;
  size_t s_total = 0, r_total = 0;
  sd = displacements(sc, false, &s_total);
  rd = displacements(rc, false, &r_total);
  std::vector<int64_t> send(s_total, 1), recv(r_total + kGuardElements, -7);
  const auto start = std::chrono::steady_clock::now();
  const Status status =
      comm.allToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), DataType::kInt64);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status.isOk()) return internalError(fmt::format("rank {}: the mismatched alltoallv succeeded", r));
  const std::string want = "rank 2 sends 40 bytes to rank 6, rank 6 expects 32 bytes from rank 2";
  if (status.code() != StatusCode::kInvalidArgument || status.message().find(want) == std::string::npos)
    return internalError(fmt::format("rank {}: expected an error naming '{}', got {}", r, want, status.toString()));
  if (elapsed > 10) return internalError(fmt::format("rank {}: the error took {:.1f} s", r, elapsed));
  for (int64_t v : recv)
    if (v != -7) return internalError(fmt::format("rank {}: the refused call wrote the receive buffer", r));
  return checkAllToAllv(comm, Splits::kUneven, false, DataType::kInt64);
}

TEST(AllToAllvMismatch, NamesBothRanksOnEveryRankThreads) {
  CommOptions options = modeOptions("threads", "2dh", 4);
  options.timeout_s = 20;
  const Status status = testing::runRanks(8, options, mismatchFailsEveryRank);
  EXPECT_TRUE(status.isOk()) << status.toString();
}

TEST(AllToAllvMismatch, NamesBothRanksOnEveryRankTcp) {
  for (int i = 0; i < 20 && testing::processThreadCount() > 1; ++i) usleep(100000);
  if (testing::processThreadCount() > 1) GTEST_SKIP() << "this process has threads left by earlier tests";
  CommOptions options = modeOptions("tcp", "2dh", 4);
  options.timeout_s = 20;
  testing::ForkShared<UniqueId> id;
  const testing::ForkResult result = testing::runForked(
      8,
      [&](int rank) -> int {
        Result<std::unique_ptr<Bootstrap>> bootstrap = testing::forkedBootstrap(id, rank, 8, 30);
        if (!bootstrap.isOk()) return 2;
        Result<std::unique_ptr<Communicator>> comm = Communicator::create(std::move(bootstrap).value(), options);
        if (!comm.isOk()) return 3;
        const Status status = mismatchFailsEveryRank(**comm);
        if (!status.isOk()) std::fprintf(stderr, "%s\n", status.toString().c_str());
        return status.isOk() ? 0 : 1;
      },
      120);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Without the call check the mismatch cannot be named before data moves: some rank still fails (the transport
// sees the phase-3 message sizes differ), none waits past the timeout, and nothing lands outside a receive block.
TEST(AllToAllvMismatch, WithoutTheCallCheckSomeRankFailsAndNoneHangs) {
  setenv("BRAID_CALL_CHECK", "off", 1);
  CommOptions options = modeOptions("threads", "2dh", 4);
  options.timeout_s = 5;
  std::atomic<int> failures{0};
  const auto start = std::chrono::steady_clock::now();
  const Status status = testing::runRanks(8, options, [&](Communicator& comm) -> Status {
    const int n = comm.size();
    const int r = comm.rank();
    std::vector<size_t> sc(n, 3), rc(n, 3), sd(n), rd(n);
    if (r == 2) sc[6] = 5;
    size_t s_total = 0, r_total = 0;
    sd = displacements(sc, false, &s_total);
    rd = displacements(rc, false, &r_total);
    std::vector<int64_t> send(s_total, 1), recv(r_total + kGuardElements, -7);
    const Status call =
        comm.allToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), DataType::kInt64);
    if (!call.isOk()) failures.fetch_add(1);
    for (size_t i = r_total; i < recv.size(); ++i)
      if (recv[i] != -7) return internalError(fmt::format("rank {}: wrote past the receive buffer", r));
    return Status::ok();
  });
  unsetenv("BRAID_CALL_CHECK");
  EXPECT_TRUE(status.isOk()) << status.toString();
  EXPECT_GE(failures.load(), 1);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 15.0);
}

// Auto on dgx-h100-x2 (2 nodes x 8 GPUs): the communicator runs 2dh exactly where the simulator predicts it faster
// than the direct exchange at the bucket's lower edge, says so at BRAID_DEBUG=INFO with both times, and both
// all-to-all and all-to-all-v give the right data.
TEST(AllToAllChoice, AutoFollowsTheSimulatorOnTheTopology) {
  Result<Topology> topology = loadTopologyOrShipped("dgx-h100-x2");
  ASSERT_TRUE(topology.isOk()) << topology.status().toString();
  constexpr int n = 16;
  auto predicted = [&](ClassicAlgo algo, uint64_t per_peer) {
    ClassicRequest request;
    request.algo = algo;
    request.spec.kind = CollectiveKind::kAllToAll;
    request.spec.num_ranks = n;
    request.spec.chunk_factor = 0;
    request.topology = &*topology;
    Result<Algorithm> built = buildClassic(request);
    EXPECT_TRUE(built.isOk()) << built.status().toString();
    SimOptions sim;
    sim.size_bytes = per_peer * n;
    Result<SimResult> result = simulate(*built, *topology, sim);
    EXPECT_TRUE(result.isOk()) << result.status().toString();
    return result.isOk() ? result->time_us : -1.0;
  };
  const uint64_t sizes[] = {1024, 65536, 1 << 20};
  std::vector<bool> want_2dh;
  for (uint64_t s : sizes)
    want_2dh.push_back(predicted(ClassicAlgo::kTwoDimHierarchical, s) < predicted(ClassicAlgo::kDirect, s));
  const LogLevel saved = logLevel();
  setLogLevel(LogLevel::kInfo);
  ::testing::internal::CaptureStderr();
  CommOptions options = modeOptions("threads", "auto", 0);
  options.topology = "dgx-h100-x2";
  const Status status = testing::runRanks(n, options, [&](Communicator& comm) -> Status {
    for (size_t i = 0; i < std::size(sizes); ++i) {
      // 1.5x the size: the decision is the bucket's (2^floor(log2)), simulated at its lower edge.
      BRAID_ASSIGN_OR_RETURN(AlgorithmChoice choice,
                             comm.choose(CollectiveKind::kAllToAll, sizes[i] * 3 / 2 * n, false));
      const std::string want = want_2dh[i] ? "2dh_alltoall_n16" : "direct_alltoall_n16";
      if (choice.algorithm != want)
        return internalError(
            fmt::format("{} B per peer: chose {}, the simulator says {}", sizes[i], choice.algorithm, want));
    }
    BRAID_RETURN_IF_ERROR(checkAllToAllv(comm, Splits::kUneven, true, DataType::kInt64));
    return testing::checkCollective(comm, CollectiveKind::kAllToAll, 0, "alltoall",
                                    testing::Run{uint64_t{1024} * n, false, DataType::kInt32, ReduceOp::kSum});
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  setLogLevel(saved);
  ASSERT_TRUE(status.isOk()) << status.toString();
  for (uint64_t s : sizes) {
    const std::string line = fmt::format("predicted on dgx-h100-x2 at {} B per peer: 2dh ", s);
    EXPECT_NE(err.find(line), std::string::npos) << "no decision logged for " << s << " B per peer:\n" << err;
  }
  EXPECT_NE(err.find(", flat "), std::string::npos) << err;
  EXPECT_NE(err.find("2 node(s) x 8 rank(s) (topology dgx-h100-x2)"), std::string::npos) << err;
}

// Forced modes name themselves in the log; without a topology auto stays flat and says why.
TEST(AllToAllChoice, ForcedAndUnpredictableModesSayWhy) {
  const LogLevel saved = logLevel();
  setLogLevel(LogLevel::kInfo);
  ::testing::internal::CaptureStderr();
  Status status = testing::runRanks(4, modeOptions("threads", "2dh", 2), [](Communicator& comm) {
    return checkAllToAllv(comm, Splits::kZeros, false, DataType::kInt64);
  });
  if (status.isOk()) {
    status = testing::runRanks(4, modeOptions("threads", "auto", 2), [](Communicator& comm) -> Status {
      BRAID_RETURN_IF_ERROR(expectAllToAllAlgorithm(comm, false));
      return checkAllToAllv(comm, Splits::kZeros, false, DataType::kInt64);
    });
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  setLogLevel(saved);
  ASSERT_TRUE(status.isOk()) << status.toString();
  EXPECT_NE(err.find("2dh, forced (CommOptions::alltoall=2dh)"), std::string::npos) << err;
  EXPECT_NE(err.find("flat, no topology (BRAID_TOPO) to predict"), std::string::npos) << err;
  EXPECT_NE(err.find("2 node(s) x 2 rank(s) (CommOptions::ranks_per_node = 2)"), std::string::npos) << err;
}

TEST(AllToAllChoice, SettingErrorsNameTheSetting) {
  Status status = testing::runRanks(2, modeOptions("threads", "fast", 0), [](Communicator&) { return Status::ok(); });
  EXPECT_NE(status.message().find("CommOptions::alltoall=fast: not one of auto, flat, 2dh"), std::string::npos)
      << status.toString();
  setenv("BRAID_ALLTOALL", "hierarchical", 1);
  status = testing::runRanks(2, modeOptions("threads", "", 0), [](Communicator&) { return Status::ok(); });
  unsetenv("BRAID_ALLTOALL");
  EXPECT_NE(status.message().find("BRAID_ALLTOALL=hierarchical"), std::string::npos) << status.toString();
  setenv("BRAID_RANKS_PER_NODE", "3", 1);
  status = testing::runRanks(4, modeOptions("threads", "2dh", 0), [](Communicator&) { return Status::ok(); });
  EXPECT_NE(status.message().find("BRAID_RANKS_PER_NODE=3: 4 ranks do not split into nodes of 3"), std::string::npos)
      << status.toString();
  setenv("BRAID_RANKS_PER_NODE", "four", 1);
  status = testing::runRanks(4, modeOptions("threads", "2dh", 0), [](Communicator&) { return Status::ok(); });
  unsetenv("BRAID_RANKS_PER_NODE");
  EXPECT_NE(status.message().find("BRAID_RANKS_PER_NODE=four"), std::string::npos) << status.toString();
  CommOptions contradicts = modeOptions("threads", "auto", 4);
  contradicts.topology = "dgx-h100-x2";
  status = testing::runRanks(16, contradicts, [](Communicator&) { return Status::ok(); });
  EXPECT_NE(status.message().find("contradicts topology 'dgx-h100-x2', whose nodes hold 8 GPUs each"),
            std::string::npos)
      << status.toString();
}

TEST(NodeShape, FromHosts) {
  comm::NodeShape s = comm::nodeShapeFromHosts({"a", "a", "b", "b", "c", "c"});
  EXPECT_EQ(s.nodes, 3);
  EXPECT_EQ(s.ranks_per_node, 2);
  EXPECT_EQ(s.source, "hosts");
  s = comm::nodeShapeFromHosts({"a"});
  EXPECT_EQ(s.nodes, 1);
  EXPECT_EQ(s.ranks_per_node, 1);
  s = comm::nodeShapeFromHosts({"a", "b", "a", "b"});
  EXPECT_FALSE(s.known());
  EXPECT_NE(s.source.find("host a holds ranks that are not consecutive"), std::string::npos) << s.source;
  s = comm::nodeShapeFromHosts({"a", "a", "a", "b"});
  EXPECT_FALSE(s.known());
  EXPECT_NE(s.source.find("do not split into blocks of 3"), std::string::npos) << s.source;
  s = comm::nodeShapeFromHosts({"a", "a", "b", "c"});
  EXPECT_FALSE(s.known());
  EXPECT_NE(s.source.find("rank 2 is on b, rank 3 on c"), std::string::npos) << s.source;
}

TEST(NodeShape, TopologyThenRanksPerNodeThenHosts) {
  Result<Topology> topology = loadTopologyOrShipped("dgx-h100-x2");
  ASSERT_TRUE(topology.isOk());
  const std::vector<std::string> one_host(16, "h");
  Result<comm::NodeShape> s = comm::resolveNodeShape(16, &*topology, 0, "", one_host);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->toString(), "2 node(s) x 8 rank(s) (topology dgx-h100-x2)");
  s = comm::resolveNodeShape(16, &*topology, 8, "BRAID_RANKS_PER_NODE=8", one_host);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->nodes, 2);
  EXPECT_FALSE(comm::resolveNodeShape(16, &*topology, 4, "BRAID_RANKS_PER_NODE=4", one_host).isOk());
  s = comm::resolveNodeShape(16, nullptr, 4, "BRAID_RANKS_PER_NODE=4", one_host);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->toString(), "4 node(s) x 4 rank(s) (BRAID_RANKS_PER_NODE=4)");
  s = comm::resolveNodeShape(16, nullptr, 0, "", one_host);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->toString(), "1 node(s) x 16 rank(s) (hosts)");
  EXPECT_FALSE(comm::resolveNodeShape(16, nullptr, 5, "BRAID_RANKS_PER_NODE=5", one_host).isOk());
}

// The 2DH plan of rank 5 of 2 x 4 (node 1, local 1): one message to each node peer (4, 6, 7) carrying its blocks
// for both nodes, one to rank 1 (the same local index on node 0) carrying the four blocks of node 1 for it, nothing
// to any other rank; large blocks split into slices' worth of steps, identically on both ends.
TEST(AllToAllvPlan, TwoDimMessagesFollowTheNodeGrid) {
  constexpr int m = 2, g = 4, n = 8, r = 5;
  comm::AllToAllvCall call;
  call.rank = r;
  call.num_ranks = n;
  call.element_bytes = 8;
  uint64_t at = 0;
  for (int p = 0; p < n; ++p) {
    call.send_bytes.push_back(8 * (p + 1));
    call.send_offset.push_back(at);
    call.recv_bytes.push_back(16 * (p + 1));
    call.recv_offset.push_back(at);
    at += 16 * (p + 1);
  }
  call.input_bytes = call.output_bytes = at;
  // What node peer (1, jj) sends rank 5 for (0, 1) (96 B) and for rank 5 itself (its recv_bytes).
  std::vector<uint64_t> from_node_peers(m * g);
  for (int jj = 0; jj < g; ++jj) {
    from_node_peers[jj * m + 0] = 96;
    from_node_peers[jj * m + 1] = call.recv_bytes[4 + jj];
  }
  Result<Plan> plan = comm::twoDimAllToAllvPlan(call, m, g, from_node_peers);
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  std::map<int, int> sends;
  std::map<int, uint64_t> bytes;
  for (const PlanThreadblock& tb : plan->ranks[r].threadblocks) {
    for (const PlanStep& s : tb.steps) {
      if (s.type != OpType::kSend) continue;
      ++sends[tb.send_peer];
      bytes[tb.send_peer] += s.bytes;
    }
  }
  EXPECT_EQ(sends, (std::map<int, int>{{1, 1}, {4, 1}, {6, 1}, {7, 1}}));
  // To node peer (1, jj): its blocks for (0, jj) and (1, jj); to rank 1: the blocks of ranks 4..7 for rank 1.
  EXPECT_EQ(bytes[4], call.send_bytes[0] + call.send_bytes[4]);
  EXPECT_EQ(bytes[6], call.send_bytes[2] + call.send_bytes[6]);
  EXPECT_EQ(bytes[1], call.send_bytes[1] + 3 * 96);
  // Blocks larger than a slice (524288 B) for rank 1: a step each, the own 16 B block alone between them.
  for (int jj = 0; jj < g; ++jj) from_node_peers[jj * m + 0] = 600000;
  Result<Plan> big = comm::twoDimAllToAllvPlan(call, m, g, from_node_peers);
  ASSERT_TRUE(big.isOk()) << big.status().toString();
  int big_sends_to_1 = 0;
  for (const PlanThreadblock& tb : big->ranks[r].threadblocks)
    for (const PlanStep& s : tb.steps) big_sends_to_1 += s.type == OpType::kSend && tb.send_peer == 1;
  EXPECT_EQ(big_sends_to_1, 4);
}

}  // namespace
}  // namespace braid
