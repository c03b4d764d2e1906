// The DataTransport contract (include/braid/transport.h), one suite run on every transport built: threads
// (ranks are threads of one forked process), shm, tcp and, with BRAID_HAVE_UCX, ucx (one forked process per
// rank). Request by request: names, checks at post time, FIFO matching per (peer, channel), 64 MiB exchanged
// both ways before either receive is posted (checked word by word), zero-byte messages, receives posted first,
// local copies and reductions; then size mismatches naming both ranks, timeouts naming what is awaited, abort,
// a killed rank, a send that completed before its bytes left, and classical plans on 2, 3 and 4 ranks checked
// against naive references (transport_check.h). What only one transport has stays in <transport>_test.cc.
//
// With CUDA, the CUDA transport is a parameter too (device memory mirrored to the host buffers the checks read,
// tests/transport/cuda_mirror.h); on a machine without a GPU its tests skip, naming cudaGetDeviceCount's error.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "braid/bootstrap.h"
#include "braid/transports.h"
#include "transport/factory.h"
#include "transport/multirank.h"
#include "transport/transport_check.h"
#ifdef BRAID_HAVE_CUDA
#include "transport/cuda_mirror.h"
#endif

namespace braid {
namespace {

using testing::ForkResult;
using testing::TransportUnderTest;

// UCX's transports for the tests: TCP over loopback works in every container (shared-memory transports need
// /dev/shm and, for large messages, cross-memory attach). An explicit UCX_TLS from the environment wins.
void preferUcxOverTcp() { setenv("UCX_TLS", "tcp,self", /*overwrite=*/0); }

// The TCP transport's congestion policies (runtime/congestion): the defaults (fixed: NCCL's chunks and window),
// adaptive with its defaults (receivers admit every sender: no grants unless TCP times out), and adaptive with
// receivers that start gated at one sender (BRAID_CC_ADMIT=1; admission grows by one per round of grants and opens
// again at every sender, so the suite crosses gated -> open), one active peer and chunks small enough that every
// message of the suite larger than 64 KiB is cut into many chunks, granted while gated and each acknowledged.
const char* const kCongestionVariables[] = {"BRAID_CC_POLICY",       "BRAID_CC_CHUNK_MIN", "BRAID_CC_CHUNK_MAX",
                                            "BRAID_CC_WINDOW",       "BRAID_CC_CREDITS",   "BRAID_CC_GRANT",
                                            "BRAID_CC_ACTIVE_PEERS", "BRAID_CC_ADMIT"};
void tcpDefaults() {
  for (const char* name : kCongestionVariables) unsetenv(name);
}
void tcpAdaptive() {
  tcpDefaults();
  setenv("BRAID_CC_POLICY", "adaptive", 1);
}
void tcpTight() {
  tcpAdaptive();
  setenv("BRAID_CC_CHUNK_MIN", "16K", 1);
  setenv("BRAID_CC_CHUNK_MAX", "64K", 1);
  setenv("BRAID_CC_WINDOW", "256K", 1);
  setenv("BRAID_CC_GRANT", "128K", 1);
  setenv("BRAID_CC_CREDITS", "1", 1);
  setenv("BRAID_CC_ADMIT", "1", 1);
  setenv("BRAID_CC_ACTIVE_PEERS", "1", 1);
}

#ifdef BRAID_HAVE_CUDA
// NCCL gives every rank process of one GPU its own host id (cuda_mirror.h); ranks as threads need a GPU each.
std::string cudaThreadsUnavailable(int n) {
  if (testing::cudaDevicesForTests() >= n) return "";
  return "NCCL refuses two ranks of one process on one GPU; " + std::to_string(n) + " ranks as threads need " +
         std::to_string(n) + " GPUs, this machine has " + std::to_string(testing::cudaDevicesForTests());
}
TransportUnderTest cudaUnderTest() {
  TransportUnderTest t;
  t.name = "cuda";
  t.create = &testing::createMirroredCudaTransport;
  t.idle_send_bytes = 4 << 20;
  t.unavailable = &testing::cudaSkipReason;
  t.threads_unavailable = &cudaThreadsUnavailable;
  return t;
}
#endif

// TCP sends complete once written to the socket, so an idle receiver can hold only what the kernel buffers (and,
// with credits, messages up to the 64 KiB eager size).
const TransportUnderTest kTransports[] = {
    {"threads", &createThreadsTransport, /*ranks_are_threads=*/true, 4 << 20, nullptr},
    {"shm", &createShmTransport, false, 4 << 20, nullptr},
    {"tcp", &createTcpTransport, false, 16 << 10, &tcpDefaults},
    {"tcp", &createTcpTransport, false, 16 << 10, &tcpAdaptive, "tcp_adaptive"},
    {"tcp", &createTcpTransport, false, 16 << 10, &tcpTight, "tcp_adaptive_tight"},
#ifdef BRAID_HAVE_UCX
    {"ucx", &createUcxTransport, false, 4 << 20, &preferUcxOverTcp},
#endif
#ifdef BRAID_HAVE_CUDA
    cudaUnderTest(),
#endif
};

class TransportConformance : public ::testing::TestWithParam<TransportUnderTest> {};
// The transports whose ranks are separate processes: the ones where a single rank can die.
class ProcessTransportConformance : public ::testing::TestWithParam<TransportUnderTest> {};

BufferRef ref(BufferKind kind, uint64_t offset, uint64_t bytes) { return BufferRef{kind, offset, bytes}; }

/// Rank r's test bytes (`bytes` a multiple of 8): 64-bit words that depend on the rank and the position.
std::vector<uint8_t> patternBytes(int r, size_t bytes) {
  std::vector<uint8_t> data(bytes);
  for (size_t w = 0; w < bytes / 8; ++w) {
    const uint64_t value = (w + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(r + 1) << 52);
    std::memcpy(data.data() + 8 * w, &value, 8);
  }
  return data;
}

/// The index of the first 64-bit word where `got` and `want` differ over `bytes` (a multiple of 8), or -1.
long firstWrongWord(const uint8_t* got, const uint8_t* want, size_t bytes) {
  for (size_t w = 0; w < bytes / 8; ++w) {
    if (std::memcmp(got + 8 * w, want + 8 * w, 8) != 0) return static_cast<long>(w);
  }
  return -1;
}

// Checks at post time, FIFO order per channel, 64 MiB both ways before either receive is posted, zero-byte
// messages, receives posted before their sends, local copy and uint8 sum.
TEST_P(TransportConformance, RequestsMatchPerChannelInOrder) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  const TransportUnderTest& transport = GetParam();
  TransportOptions options;
  options.timeout_s = 20;
  const ForkResult result = testing::runRanks(
      transport, 2, options,
      [&](int rank, Bootstrap& bootstrap, DataTransport& t) {
        BRAID_CHILD_CHECK(std::string(t.name()) == transport.name);
        BRAID_CHILD_CHECK(t.localRanks() == std::vector<int>{rank});
        const int peer = 1 - rank;
        // 64 MiB to send and as much to receive: more than socket buffers, shm rings or eager UCX messages hold.
        const uint64_t big = 64u << 20;
        std::vector<uint8_t> input = patternBytes(rank, big + 4096), output(big + 4096), scratch(4096);
        const std::vector<uint8_t> from_peer = patternBytes(peer, big + 4096);
        RankMemory memory{input.data(), input.size(), output.data(), output.size(), scratch.data(), scratch.size()};
        BRAID_CHILD_CHECK(t.bind(peer, memory, {}).code() == StatusCode::kInvalidArgument);  // not local
        BRAID_CHILD_CHECK_OK(t.bind(rank, memory, ReduceSpec{DataType::kUint8, ReduceOp::kSum}));
        std::vector<RequestId> seen;

        // Out of range, bad ends and bad channels are refused at post time, naming the buffer or the ranks.
        auto past = t.postSend(SendRequest{rank, peer, 0, ref(BufferKind::kInput, input.size() - 1, 2)});
        BRAID_CHILD_CHECK(past.status().code() == StatusCode::kInvalidArgument);
        BRAID_CHILD_CHECK(past.status().message().find("is past the input buffer") != std::string::npos);
        auto recv_past = t.postRecv(RecvRequest{rank, peer, 0, ref(BufferKind::kOutput, output.size() - 4, 8)});
        BRAID_CHILD_CHECK(recv_past.status().message().find("is past the output buffer") != std::string::npos);
        BRAID_CHILD_CHECK(t.postRecv(RecvRequest{rank, rank, 0, ref(BufferKind::kOutput, 0, 1)}).status().code() ==
                          StatusCode::kInvalidArgument);  // from itself
        BRAID_CHILD_CHECK(t.postSend(SendRequest{rank, 2, 0, ref(BufferKind::kInput, 0, 1)}).status().code() ==
                          StatusCode::kInvalidArgument);  // no rank 2
        BRAID_CHILD_CHECK(t.postSend(SendRequest{peer, rank, 0, ref(BufferKind::kInput, 0, 1)}).status().code() ==
                          StatusCode::kInvalidArgument);  // not this endpoint's rank
        const Status negative = t.postRecv(RecvRequest{rank, peer, -1, ref(BufferKind::kOutput, 0, 1)}).status();
        BRAID_CHILD_CHECK(negative.code() == StatusCode::kInvalidArgument);
        BRAID_CHILD_CHECK(negative.message().find(std::string(transport.name) + ": rank") == 0);
        BRAID_CHILD_CHECK(negative.message().find("channel -1") != std::string::npos);

        // Both ranks send 64 MiB to each other before either posts its receive: the sends complete (buffered,
        // or drained by the peer's progress), so nothing deadlocks.
        auto send_big = t.postSend(SendRequest{rank, peer, 3, ref(BufferKind::kInput, 0, big)});
        BRAID_CHILD_CHECK_OK(send_big);
        BRAID_CHILD_CHECK_OK(testing::waitCollecting(t, *send_big, &seen));
        // Small messages on two channels, sent 1a 2a 1b 2b; received channel 2 first, then channel 1.
        const uint64_t base = big;
        for (int k = 0; k < 4; ++k) {
          const int channel = 1 + (k % 2);
          BRAID_CHILD_CHECK_OK(
              t.postSend(SendRequest{rank, peer, channel, ref(BufferKind::kInput, base + 16 * k, 16)}));
        }
        BRAID_CHILD_CHECK_OK(t.postSend(SendRequest{rank, peer, 7, ref(BufferKind::kInput, 0, 0)}));
        std::vector<RequestId> recvs;
        for (const int k : {1, 3, 0, 2}) {  // channel 2's messages (k = 1, 3), then channel 1's (k = 0, 2)
          const int channel = 1 + (k % 2);
          auto r = t.postRecv(RecvRequest{rank, peer, channel, ref(BufferKind::kOutput, base + 16 * k, 16)});
          BRAID_CHILD_CHECK_OK(r);
          recvs.push_back(*r);
        }
        auto r_zero = t.postRecv(RecvRequest{rank, peer, 7, ref(BufferKind::kOutput, 0, 0)});
        BRAID_CHILD_CHECK_OK(r_zero);
        auto r_big = t.postRecv(RecvRequest{rank, peer, 3, ref(BufferKind::kOutput, 0, big)});
        BRAID_CHILD_CHECK_OK(r_big);
        for (RequestId id : recvs) BRAID_CHILD_CHECK_OK(testing::waitCollecting(t, id, &seen));
        BRAID_CHILD_CHECK_OK(testing::waitCollecting(t, *r_zero, &seen));
        BRAID_CHILD_CHECK_OK(testing::waitCollecting(t, *r_big, &seen));
        // What the peer sent, word by word: 64 MiB of its pattern, then its 4 small messages in channel order.
        const long wrong = firstWrongWord(output.data(), from_peer.data(), big + 64);
        if (wrong >= 0) std::fprintf(stderr, "rank %d: word %ld of what rank %d sent is wrong\n", rank, wrong, peer);
        BRAID_CHILD_CHECK(wrong < 0);
        // Receives posted before the sends (a large and a small one).
        auto early = t.postRecv(RecvRequest{rank, peer, 4, ref(BufferKind::kOutput, 0, 1 << 20)});
        BRAID_CHILD_CHECK_OK(early);
        auto early_small = t.postRecv(RecvRequest{rank, peer, 4, ref(BufferKind::kOutput, 1 << 20, 24)});
        BRAID_CHILD_CHECK_OK(early_small);
        BRAID_CHILD_CHECK_OK(bootstrap.barrier());
        auto late_send = t.postSend(SendRequest{rank, peer, 4, ref(BufferKind::kInput, 4096, 1 << 20)});
        BRAID_CHILD_CHECK_OK(late_send);
        auto late_small = t.postSend(SendRequest{rank, peer, 4, ref(BufferKind::kInput, 8, 24)});
        BRAID_CHILD_CHECK_OK(late_small);
        for (RequestId id : {*early, *early_small, *late_send, *late_small})
          BRAID_CHILD_CHECK_OK(testing::waitCollecting(t, id, &seen));
        BRAID_CHILD_CHECK(firstWrongWord(output.data(), from_peer.data() + 4096, 1 << 20) < 0);
        BRAID_CHILD_CHECK(firstWrongWord(output.data() + (1 << 20), from_peer.data() + 8, 24) < 0);
        // Local requests run at post time and complete at the next poll: copy, then a uint8 sum.
        scratch[0] = 5;
        scratch[1] = 250;
        scratch[2] = 9;
        scratch[3] = 10;
        auto copy = t.postLocal(LocalRequest{rank, ref(BufferKind::kScratch, 0, 2), ref(BufferKind::kScratch, 8, 2)});
        BRAID_CHILD_CHECK_OK(copy);
        BRAID_CHILD_CHECK(scratch[8] == 5 && scratch[9] == 250);  // (CUDA: its test wrapper waited for the kernel)
        auto sum = t.postLocal(
            LocalRequest{rank, ref(BufferKind::kScratch, 2, 2), ref(BufferKind::kScratch, 8, 2), /*reduce=*/true});
        BRAID_CHILD_CHECK_OK(sum);
        BRAID_CHILD_CHECK(scratch[8] == 14 && scratch[9] == 4);  // 250 + 10 wraps to 4
        const Status local_past =
            t.postLocal(LocalRequest{rank, ref(BufferKind::kScratch, 4090, 8), ref(BufferKind::kScratch, 0, 8)})
                .status();
        BRAID_CHILD_CHECK(local_past.message().find("is past the scratch buffer") != std::string::npos);
        BRAID_CHILD_CHECK_OK(testing::waitCollecting(t, *copy, &seen));
        BRAID_CHILD_CHECK_OK(testing::waitCollecting(t, *sum, &seen));
        // Request ids are distinct.
        std::vector<RequestId> ids = seen;
        std::sort(ids.begin(), ids.end());
        BRAID_CHILD_CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
        // Keep both endpoints until everything the peer sent has arrived.
        return bootstrap.barrier().isOk() ? 0 : 1;
      },
      60);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Every standard case (transport_check.h) on 2, 3 and 4 ranks over one endpoint each.
TEST_P(TransportConformance, ClassicalPlansOnTwoThreeAndFourRanks) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  for (int n : {2, 3, 4}) {
    const ForkResult result = testing::forkCollectives(GetParam(), n);
    EXPECT_TRUE(result.allOk()) << n << " ranks:\n" << result.summary();
  }
}

// Ranks as threads of one process, each with its own bootstrap and endpoint (braid_perf -t): endpoints share
// nothing they should not (for shm: the same segments mapped twice in one address space).
TEST_P(TransportConformance, ClassicalPlansOnThreadsOfOneProcess) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  if (GetParam().threads_unavailable != nullptr) {
    const std::string why = GetParam().threads_unavailable(3);
    if (!why.empty()) GTEST_SKIP() << GetParam().name << " transport: " << why;
  }
  TransportOptions options;
  options.timeout_s = 30;
  const ForkResult result = testing::runRanks(
      GetParam(), 3, options,
      [](int rank, Bootstrap&, DataTransport& endpoint) {
        int failures = 0;
        for (const testing::CollectiveCase& c :
             {testing::CollectiveCase{ClassicAlgo::kRing, CollectiveKind::kAllReduce, 300007, false, 1},
              testing::CollectiveCase{ClassicAlgo::kPairwise, CollectiveKind::kAllToAll, 1001, false, 1}}) {
          failures += testing::report(rank, c.describe().c_str(), testing::runCase(endpoint, rank, 3, c));
        }
        // No barrier before the endpoints go: each rank destroys its endpoint as soon as its own work is done,
        // while peers in the same process may still be receiving its last sends.
        return failures;
      },
      /*timeout_s=*/60, /*as_threads=*/true);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// A message matched with a receive of another size: kInvalidArgument naming both ranks and sizes, whether the
// message is shorter or longer than the receive (UCX truncates a longer one and says "more than").
TEST_P(TransportConformance, SizeMismatchNamesBothRanksAndSizes) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  ForkResult result = testing::forkSizeMismatch(GetParam(), 4, 8,
                                                {"rank 0 -> rank 1 channel 0: a message of 4 bytes matched a receive "
                                                 "of 8 bytes"});
  EXPECT_TRUE(result.allOk()) << result.summary();
  result = testing::forkSizeMismatch(GetParam(), 8, 4,
                                     {"rank 0 -> rank 1 channel 0: a message of ", " matched a receive of 4 bytes"});
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST_P(TransportConformance, TimeoutNamesWhatIsAwaited) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  const ForkResult result = testing::forkTimeout(GetParam());
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// A timeout of 1e10 s (BRAID_TIMEOUT=1e10, BRAID_TIMEOUT=inf, or TransportOptions::timeout_s = 1e10) waits as
// asked on every transport: rank 1's blocking wait for a message rank 0 sends after 0.5 s completes with it,
// instead of failing at once because the deadline overflowed.
TEST_P(TransportConformance, HugeTimeoutWaitsAsAsked) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  for (const char* env : {"1e10", "inf", static_cast<const char*>(nullptr)}) {
    TransportOptions options;
    if (env != nullptr) {
      setenv("BRAID_TIMEOUT", env, /*overwrite=*/1);
    } else {
      options.timeout_s = 1e10;
    }
    const ForkResult result = testing::runRanks(
        GetParam(), 2, options,
        [&](int rank, Bootstrap& bootstrap, DataTransport& endpoint) {
          std::vector<uint8_t> buffer(16, static_cast<uint8_t>(rank + 1));
          RankMemory memory{buffer.data(), 8, buffer.data() + 8, 8, nullptr, 0};
          if (testing::report(rank, "bind", endpoint.bind(rank, memory, ReduceSpec{}))) return 1;
          if (testing::report(rank, "barrier", bootstrap.barrier())) return 1;
          if (rank == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            auto sent = endpoint.postSend(SendRequest{0, 1, 2, ref(BufferKind::kInput, 0, 8)});
            if (!sent.isOk()) return testing::report(rank, "postSend", sent.status());
            if (testing::report(rank, "send", testing::waitFor(endpoint, *sent))) return 1;
          } else {
            auto posted = endpoint.postRecv(RecvRequest{1, 0, 2, ref(BufferKind::kOutput, 0, 8)});
            if (!posted.isOk()) return testing::report(rank, "postRecv", posted.status());
            double waited = 0;
            const Status status = testing::timedWaitFor(endpoint, *posted, &waited);
            if (!status.isOk() || waited < 0.3 || buffer[8] != 1) {
              std::fprintf(stderr, "after %.2f s (byte %d): %s\n", waited, buffer[8], status.toString().c_str());
              return 1;
            }
          }
          return testing::report(rank, "barrier", bootstrap.barrier());
        },
        /*timeout_s=*/60);
    unsetenv("BRAID_TIMEOUT");
    EXPECT_TRUE(result.allOk()) << (env != nullptr ? std::string("BRAID_TIMEOUT=") + env : "timeout_s = 1e10") << "\n"
                                << result.summary();
  }
}

// A BRAID_TIMEOUT that is not a positive number of seconds is refused by createTransport on every rank, naming
// the variable and its text, before any rank waits for a peer; so is a negative TransportOptions::timeout_s.
TEST_P(TransportConformance, BadTimeoutIsAnErrorNamingTheVariable) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  const TransportUnderTest& transport = GetParam();
  TransportOptions options;
  options.timeout_s = 20;
  const ForkResult result = testing::runRanks(
      transport, 2, options,
      [&](int rank, Bootstrap& bootstrap, DataTransport&) {
        // Through createTransport where the transport has a kind; the CUDA transport through its own constructor.
        const std::optional<TransportKind> kind = parseTransportKind(transport.name);
        const auto create = [&](const TransportOptions& o) {
          return kind ? createTransport(*kind, bootstrap, o) : transport.create(bootstrap, o);
        };
        for (const char* text : {"-1", "nan", "0", "forever"}) {
          if (testing::report(rank, "barrier", bootstrap.barrier())) return 1;
          // Once per process: the ranks of the threads transport are threads of one process.
          if (rank == 0 || !transport.ranks_are_threads) setenv("BRAID_TIMEOUT", text, /*overwrite=*/1);
          if (testing::report(rank, "barrier", bootstrap.barrier())) return 1;
          Result<std::unique_ptr<DataTransport>> created = create(TransportOptions{});
          const std::string want = std::string("BRAID_TIMEOUT=") + text + ": not a positive number of seconds";
          if (created.isOk() || created.status().code() != StatusCode::kInvalidArgument ||
              created.status().message().find(want) == std::string::npos) {
            std::fprintf(stderr, "rank %d, BRAID_TIMEOUT=%s: %s\n", rank, text,
                         created.isOk() ? "created" : created.status().toString().c_str());
            return 1;
          }
        }
        TransportOptions negative;
        negative.timeout_s = -5;
        Result<std::unique_ptr<DataTransport>> created = create(negative);
        if (created.isOk() || created.status().message().find("timeout_s = -5") == std::string::npos) {
          std::fprintf(stderr, "rank %d, timeout_s = -5: %s\n", rank,
                       created.isOk() ? "created" : created.status().toString().c_str());
          return 1;
        }
        return testing::report(rank, "barrier", bootstrap.barrier());
      },
      /*timeout_s=*/60);
  unsetenv("BRAID_TIMEOUT");
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST_P(TransportConformance, AbortReachesWaitingPeer) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  const ForkResult result = testing::forkAbort(GetParam());
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Rank 2 of 4 is SIGKILLed in the middle of a 16 MiB ring all-reduce: every other rank's execute() returns
// kRemoteError naming rank 2, within seconds although the timeout is 30 s.
TEST_P(ProcessTransportConformance, KilledRankFailsThePeers) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  ASSERT_FALSE(GetParam().ranks_are_threads);
  testing::expectKilledRankFailsPeers(GetParam());
}

// A send that completed before its receive was posted arrives while the sender stays out of the transport
// (shm: a message larger than its 8 KiB ring streams from a private copy; ucx: a rendezvous from the bounce
// buffer; threads: the staged copy).
TEST_P(TransportConformance, CompletedSendArrivesWhileSenderIsIdle) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  TransportOptions options;
  options.timeout_s = 20;
  options.slot_bytes = 4096;
  options.fifo_depth = 2;
  const ForkResult result = testing::forkIdleSender(GetParam(), options, GetParam().idle_send_bytes);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Benchmark, run with --gtest_also_run_disabled_tests: 4 ranks, ring all-reduce of 64 MiB fp32 (2 warm-up, 10
// timed runs); prints rank 0's line.
TEST_P(TransportConformance, DISABLED_RingAllReduce64MiBBusBw) {
  BRAID_SKIP_UNLESS_AVAILABLE(GetParam());
  const ForkResult result = testing::forkRingAllReduceBusBw(GetParam(), 4, 64 << 20, 2, 10);
  EXPECT_TRUE(result.allOk()) << result.summary();
  if (!result.ranks.empty()) std::printf("%s", result.ranks[0].output.c_str());
}

std::string transportName(const ::testing::TestParamInfo<TransportUnderTest>& info) {
  return std::string(info.param.label != nullptr ? info.param.label : info.param.name);
}

std::vector<TransportUnderTest> processTransports() {
  std::vector<TransportUnderTest> out;
  for (const TransportUnderTest& t : kTransports) {
    if (!t.ranks_are_threads) out.push_back(t);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportConformance, ::testing::ValuesIn(kTransports), transportName);
INSTANTIATE_TEST_SUITE_P(Transports, ProcessTransportConformance, ::testing::ValuesIn(processTransports()),
                         transportName);

}  // namespace
}  // namespace braid
