// The communicator's API: the C API in NCCL's shape, argument errors, all-to-allv, rooted collectives,
// algorithm selection (BRAID_ALGO_DIR, forced, classical rule; the Pareto set is in tests/synth), BRAID_DEBUG logs,
// abort.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "braid/braid.h"
#include "braid/classic.h"
#include "comm/comm_test_util.h"
#include "comm/selection.h"
#include "common/log.h"

namespace braid {
namespace {

using testing::runRanks;

std::string tempDir(const std::string& tag) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("braid-comm-{}-{}", tag, getpid())).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A failed init has no communicator to hold its message: braidGetLastError(NULL) returns it (per thread), each
// message starting with the name of the call the user made.
TEST(CApi, LastErrorOfAFailedInitIsThisThreadsWithoutAComm) {
  braidComm_t comm = nullptr;
  braidUniqueId id{};
  EXPECT_EQ(braidCommInitRank(&comm, 2, id, 5), braidInvalidArgument);
  EXPECT_EQ(std::string(braidGetLastError(nullptr)),
            "braidCommInitRank: rank 5 of 2 ranks is out of range (nranks >= 1, 0 <= rank < nranks)");
  std::string other_thread = "unset";
  std::thread([&] { other_thread = braidGetLastError(nullptr); }).join();
  EXPECT_EQ(other_thread, "");

  setenv("BRAID_TIMEOUT", "abc", 1);
  EXPECT_EQ(braidGetUniqueId(&id), braidInvalidArgument);
  EXPECT_EQ(std::string(braidGetLastError(nullptr)),
            "braidGetUniqueId: bootstrap root: BRAID_TIMEOUT=abc: not a positive number of seconds (or inf)");
  braidComm_t comms[2] = {};
  EXPECT_EQ(braidCommInitAll(comms, 2, nullptr), braidInvalidArgument);
  EXPECT_EQ(std::string(braidGetLastError(nullptr)),
            "braidCommInitAll: braidGetUniqueId: bootstrap root: BRAID_TIMEOUT=abc: not a positive number of seconds "
            "(or inf)");
  unsetenv("BRAID_TIMEOUT");

  // A rank's own failure inside braidCommInitAll: reported under braidCommInitAll on the calling thread.
  setenv("BRAID_TRANSPORT", "bogus", 1);
  EXPECT_NE(braidCommInitAll(comms, 2, nullptr), braidSuccess);
  unsetenv("BRAID_TRANSPORT");
  EXPECT_EQ(comms[0], nullptr);
  const std::string all = braidGetLastError(nullptr);
  EXPECT_EQ(all.rfind("braidCommInitAll: ", 0), 0u) << all;
  EXPECT_NE(all.find("BRAID_TRANSPORT"), std::string::npos) << all;
  EXPECT_EQ(all.find("braidCommInitRank"), std::string::npos) << all;

  unsetenv("BRAID_RANK");
  unsetenv("BRAID_NRANKS");
  EXPECT_NE(braidCommInitEnv(&comm), braidSuccess);
  const std::string env = braidGetLastError(nullptr);
  EXPECT_EQ(env.rfind("braidCommInitEnv: ", 0), 0u) << env;
  EXPECT_GT(env.size(), std::string("braidCommInitEnv: ").size());
}

// Settings that differ between ranks: the error names the setting (and, for the transport, both values), on
// every rank, instead of a mismatch in a later exchange.
TEST(CommSettings, DifferingTransportOrAllToAllNamesTheSetting) {
  const auto createTwo = [](const std::function<void(int, CommOptions&)>& set) {
    Result<UniqueId> id = createUniqueId("127.0.0.1:0");
    EXPECT_TRUE(id.isOk());
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        CommOptions options;
        options.timeout_s = 10;
        set(r, options);
        Result<std::unique_ptr<Communicator>> comm = Communicator::create(*id, r, 2, options);
        errors[r] = comm.isOk() ? "created" : comm.status().message();
      });
    }
    for (auto& t : threads) t.join();
    return errors;
  };
  std::vector<std::string> errors = createTwo([](int r, CommOptions& o) { o.transport = r == 0 ? "threads" : "tcp"; });
  EXPECT_EQ(errors[0],
            "rank 0: CommOptions::transport differs between ranks: rank 1 has 'tcp', rank 0 has 'threads' (every rank "
            "must choose the same transport)");
  EXPECT_EQ(errors[1],
            "rank 1: CommOptions::transport differs between ranks: rank 0 has 'threads', rank 1 has 'tcp' (every rank "
            "must choose the same transport)");
  errors = createTwo([](int r, CommOptions& o) { o.transport = r == 0 ? "threads" : "bogus"; });
  EXPECT_NE(errors[0].find("rank 1 has 'bogus'"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1], "rank 1: CommOptions::transport=bogus: unknown transport (auto, threads, shm, tcp, ucx)");
  errors = createTwo([](int r, CommOptions& o) {
    o.transport = "threads";
    o.alltoall = r == 1 ? "flat" : "auto";
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("rank 1 chooses all-to-all algorithms differently than rank 0"), std::string::npos)
        << errors[r];
    EXPECT_NE(errors[r].find("BRAID_ALLTOALL"), std::string::npos) << errors[r];
  }
}

TEST(CApi, AllReduceOnFourThreads) {
  constexpr int n = 4;
  braidComm_t comms[n] = {};
  ASSERT_EQ(braidCommInitAll(comms, n, nullptr), braidSuccess);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      int rank = -1, count = -1;
      if (braidCommUserRank(comms[r], &rank) != braidSuccess || rank != r) ++wrong;
      if (braidCommCount(comms[r], &count) != braidSuccess || count != n) ++wrong;
      // 1000 floats: rank r holds r + i; the sum over ranks is 4i + 6.
      std::vector<float> send(1000), recv(1000, -1);
      for (int i = 0; i < 1000; ++i) send[i] = static_cast<float>(r + i);
      if (braidAllReduce(send.data(), recv.data(), 1000, braidFloat, braidSum, comms[r], nullptr) != braidSuccess)
        ++wrong;
      for (int i = 0; i < 1000; ++i)
        if (recv[i] != static_cast<float>(4 * i + 6)) ++wrong;
      // In place, max: max over r of (r * 10 - i) = 30 - i.
      std::vector<int32_t> buf(100);
      for (int i = 0; i < 100; ++i) buf[i] = r * 10 - i;
      if (braidAllReduce(buf.data(), buf.data(), 100, braidInt32, braidMax, comms[r], nullptr) != braidSuccess) ++wrong;
      for (int i = 0; i < 100; ++i)
        if (buf[i] != 30 - i) ++wrong;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  for (int r = 0; r < n; ++r) EXPECT_EQ(braidCommDestroy(comms[r]), braidSuccess);
}

TEST(CApi, ArgumentErrorsNameTheProblem) {
  constexpr int n = 2;
  braidComm_t comms[n] = {};
  ASSERT_EQ(braidCommInitAll(comms, n, nullptr), braidSuccess);
  float buf[8] = {};
  int stream_token = 0;
  // Rejected before any communication, so one rank may call them alone.
  EXPECT_EQ(braidAllReduce(buf, buf, 8, static_cast<braidDataType_t>(42), braidSum, comms[0], nullptr),
            braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comms[0])).find("datatype 42"), std::string::npos);
  EXPECT_EQ(braidAllReduce(buf, buf, 8, braidFloat, static_cast<braidRedOp_t>(9), comms[0], nullptr),
            braidInvalidArgument);
  EXPECT_EQ(braidAllReduce(buf, buf, 8, braidFloat, braidSum, comms[0], &stream_token), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comms[0])).find("stream"), std::string::npos);
  EXPECT_EQ(braidAllReduce(nullptr, buf, 8, braidFloat, braidSum, comms[0], nullptr), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comms[0])).find("send buffer is null"), std::string::npos);
  // Overlapping but not the in-place layout.
  EXPECT_EQ(braidAllReduce(buf, buf + 1, 4, braidFloat, braidSum, comms[0], nullptr), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comms[0])).find("overlap"), std::string::npos);
  EXPECT_EQ(braidBroadcast(buf, buf, 8, braidFloat, 5, comms[0], nullptr), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comms[0])).find("root 5"), std::string::npos);
  // Counts whose byte size overflows (2^62 floats x 2 ranks) or exceeds any buffer: refused, never run short.
  float other_buf[8] = {};
  EXPECT_EQ(braidAllGather(buf, other_buf, size_t{1} << 62, braidFloat, comms[0], nullptr), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comms[0])).find("overflows"), std::string::npos)
      << braidGetLastError(comms[0]);
  EXPECT_EQ(braidAllReduce(buf, other_buf, (size_t{1} << 62) + 16, braidFloat, braidSum, comms[0], nullptr),
            braidInvalidArgument);
  EXPECT_EQ(braidAllReduce(buf, other_buf, size_t{1} << 47, braidFloat, braidSum, comms[0], nullptr),
            braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comms[0])).find("more than any buffer"), std::string::npos)
      << braidGetLastError(comms[0]);
  EXPECT_STREQ(braidGetErrorString(braidRemoteError), "remote process exited or there was a network error");
  EXPECT_EQ(braidCommInitRank(nullptr, 2, braidUniqueId{}, 0), braidInvalidArgument);
  // braidGetVersion against the project version: version_test.cc.
  // Argument errors do not poison the communicator: a real call still works on both ranks.
  std::thread other([&] {
    float x[3] = {1, 2, 3};
    EXPECT_EQ(braidAllReduce(x, x, 3, braidFloat, braidSum, comms[1], nullptr), braidSuccess);
    EXPECT_EQ(x[2], 6.0f);
  });
  float y[3] = {1, 2, 3};
  EXPECT_EQ(braidAllReduce(y, y, 3, braidFloat, braidSum, comms[0], nullptr), braidSuccess);
  EXPECT_EQ(y[0], 2.0f);
  other.join();
  for (int r = 0; r < n; ++r) braidCommDestroy(comms[r]);
}

TEST(Communicator, AllToAllvUnevenCounts) {
  // Rank r sends r + p + 1 elements to peer p, valued 1000 r + 100 p + k; blocks packed in peer order.
  constexpr int n = 5;
  CommOptions options;
  options.transport = "threads";
  const Status status = runRanks(n, options, [&](Communicator& comm) -> Status {
    const int r = comm.rank();
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t s_total = 0, r_total = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = r + p + 1;
      sd[p] = s_total;
      s_total += sc[p];
      rc[p] = p + r + 1;
      rd[p] = r_total;
      r_total += rc[p];
    }
    std::vector<int64_t> send(s_total), recv(r_total, -1);
    for (int p = 0; p < n; ++p)
      for (size_t k = 0; k < sc[p]; ++k) send[sd[p] + k] = 1000 * r + 100 * p + static_cast<int64_t>(k);
    BRAID_RETURN_IF_ERROR(
        comm.allToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), DataType::kInt64));
    for (int p = 0; p < n; ++p) {
      for (size_t k = 0; k < rc[p]; ++k) {
        const int64_t want = 1000 * p + 100 * r + static_cast<int64_t>(k);
        if (recv[rd[p] + k] != want)
          return internalError(
              fmt::format("rank {} block from {} element {}: {} != {}", r, p, k, recv[rd[p] + k], want));
      }
    }
    return Status::ok();
  });
  EXPECT_TRUE(status.isOk()) << status.toString();
}

TEST(Communicator, AllToAllvSizeMismatchIsAnError) {
  // Rank 1 expects 3 elements from rank 0, which sends 2: an error on some rank, never a hang.
  CommOptions options;
  options.transport = "threads";
  options.timeout_s = 5;
  const Status status = runRanks(2, options, [&](Communicator& comm) -> Status {
    const int r = comm.rank();
    std::vector<size_t> sc = {2, 2}, sd = {0, 2}, rc = {2, 2}, rd = {0, 2};
    if (r == 1) {
      rc = {3, 2};
      rd = {0, 3};
    }
    std::vector<float> send(4, 1.0f), recv(5, 0.0f);
    return comm.allToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), DataType::kFloat32);
  });
  EXPECT_FALSE(status.isOk());
}

TEST(Communicator, AlgoDirWindowsAndClassicalRule) {
  // A ring all-reduce written as MSCCL XML with a window [1 MiB, 4 MiB]: chosen inside, classical outside.
  constexpr int n = 4;
  ClassicRequest request;
  request.algo = ClassicAlgo::kDirect;
  request.spec.kind = CollectiveKind::kAllReduce;
  request.spec.num_ranks = n;
  request.spec.chunk_factor = 0;
  Result<Algorithm> built = buildClassic(request);
  ASSERT_TRUE(built.isOk());
  built->name = "windowed-direct";
  built->min_bytes = 1 << 20;
  built->max_bytes = 4 << 20;
  const std::string dir = tempDir("algodir");
  {
    std::ofstream out(dir + "/windowed.xml");
    out << writeMscclXml(*built);
  }
  CommOptions options;
  options.transport = "threads";
  options.algo_dir = dir;
  const Status status = runRanks(n, options, [&](Communicator& comm) -> Status {
    BRAID_ASSIGN_OR_RETURN(AlgorithmChoice inside, comm.choose(CollectiveKind::kAllReduce, 2 << 20, false));
    if (inside.algorithm != "windowed-direct" || inside.source.find("BRAID_ALGO_DIR") != 0)
      return internalError("inside the window: " + inside.algorithm + " / " + inside.source);
    BRAID_ASSIGN_OR_RETURN(AlgorithmChoice above, comm.choose(CollectiveKind::kAllReduce, 64 << 20, false));
    if (above.source != "classical") return internalError("above the window: " + above.source);
    BRAID_ASSIGN_OR_RETURN(AlgorithmChoice small, comm.choose(CollectiveKind::kAllReduce, 1024, false));
    if (small.source != "classical") return internalError("below the window: " + small.source);
    // The directory algorithm really runs: 2 MiB of uint32, sum of r*i over ranks = 6i.
    std::vector<uint32_t> send(512 * 1024), recv(512 * 1024);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<uint32_t>(comm.rank() * i);
    BRAID_RETURN_IF_ERROR(comm.allReduce(send.data(), recv.data(), send.size(), DataType::kUint32, ReduceOp::kSum));
    for (size_t i = 0; i < recv.size(); ++i)
      if (recv[i] != static_cast<uint32_t>(6 * i)) return internalError(fmt::format("element {}", i));
    return Status::ok();
  });
  EXPECT_TRUE(status.isOk()) << status.toString();
  std::filesystem::remove_all(dir);
}

TEST(Communicator, ClassicalRule) {
  using comm::classicalRule;
  // Below 256 KiB recursive doubling (latency), at and above the ring (bandwidth); 2 ranks: ring (same rounds).
  EXPECT_EQ(classicalRule(CollectiveKind::kAllReduce, 4, 1024), ClassicAlgo::kRecursiveDoubling);
  EXPECT_EQ(classicalRule(CollectiveKind::kAllReduce, 4, 256 << 10), ClassicAlgo::kRing);
  EXPECT_EQ(classicalRule(CollectiveKind::kAllReduce, 2, 1024), ClassicAlgo::kRing);
  EXPECT_EQ(classicalRule(CollectiveKind::kAllToAll, 8, 1 << 30), ClassicAlgo::kDirect);
  // Broadcast and reduce: the binomial tree below 256 KiB with 3+ ranks (comm/README.md), else the ring chain.
  EXPECT_EQ(classicalRule(CollectiveKind::kBroadcast, 3, 1024), ClassicAlgo::kRecursiveDoubling);
  EXPECT_EQ(classicalRule(CollectiveKind::kReduce, 8, (256 << 10) - 1), ClassicAlgo::kRecursiveDoubling);
  EXPECT_EQ(classicalRule(CollectiveKind::kBroadcast, 4, 256 << 10), ClassicAlgo::kRing);
  EXPECT_EQ(classicalRule(CollectiveKind::kReduce, 2, 1024), ClassicAlgo::kRing);
}

TEST(Communicator, AlgoDirWithABadFileFailsNamingIt) {
  const std::string dir = tempDir("badalgo");
  {
    std::ofstream out(dir + "/broken.xml");
    out << "<algo name=\"x\" nchunksperloop=\"1\" nchannels=\"1\" proto=\"Simple\" ngpus=\"2\" coll=\"allreduce\">\n"
           "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"
           "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"7\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" "
           "deps=\"-1\" hasdep=\"0\"/></tb></gpu>\n";
  }
  CommOptions options;
  options.transport = "threads";
  options.algo_dir = dir;
  const Status status = runRanks(2, options, [](Communicator&) { return Status::ok(); });
  EXPECT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("broken.xml"), std::string::npos) << status.toString();
  std::filesystem::remove_all(dir);
}

TEST(Communicator, DebugInfoLogsEachChoiceOnce) {
  const LogLevel saved_level = logLevel();
  setLogLevel(LogLevel::kInfo);  // as BRAID_DEBUG=INFO
  ::testing::internal::CaptureStderr();
  CommOptions options;
  options.transport = "threads";
  const Status status = runRanks(4, options, [](Communicator& comm) -> Status {
    std::vector<float> buf(300000, 1.0f);  // 1.2 MB: the ring
    for (int i = 0; i < 3; ++i)
      BRAID_RETURN_IF_ERROR(comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum));
    return Status::ok();
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  setLogLevel(saved_level);
  ASSERT_TRUE(status.isOk()) << status.toString();
  EXPECT_NE(err.find("braid INFO rank 0: allreduce 1200000 B in-place -> "), std::string::npos) << err;
  EXPECT_NE(err.find("(classical)"), std::string::npos) << err;
  // Once per call shape, by rank 0 alone (every rank makes the same choice), not per call or per rank.
  size_t lines = 0;
  for (size_t pos = err.find(": allreduce "); pos != std::string::npos; pos = err.find(": allreduce ", pos + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << err;
  EXPECT_EQ(err.find("rank 1: allreduce"), std::string::npos) << err;
}

TEST(Communicator, AbortOnOneRankFailsTheOthersQuickly) {
  CommOptions options;
  options.transport = "threads";
  options.timeout_s = 60;
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> results(3);
  Result<UniqueId> id = createUniqueId("127.0.0.1:0");
  ASSERT_TRUE(id.isOk());
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      Result<std::unique_ptr<Communicator>> comm = Communicator::create(*id, r, 3, options);
      if (!comm.isOk()) {
        results[r] = comm.status();
        return;
      }
      if (r == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        (*comm)->abort("test abort");
        results[r] = Status(StatusCode::kRemoteError, "aborted");
        return;
      }
      std::vector<float> buf(1 << 20, 1.0f);
      results[r] = (*comm)->allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(results[0].isOk());
  EXPECT_FALSE(results[1].isOk());
  EXPECT_LT(seconds, 20.0) << "the abort must reach the others well before the 60 s timeout";
}

}  // namespace
}  // namespace braid
