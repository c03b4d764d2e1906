// The UCX transport (runtime/transport/ucx/): classical collectives between forked processes (2, 3, 4 ranks)
// checked against a naive reference (transport_check.h); buffered sends that complete before their receive
// is posted even when UCX uses rendezvous; size mismatch, timeout, abort and a killed rank. Skipped only in a
// build without UCX, where createUcxTransport must say so.
#include "transport/ucx/ucx_transport.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "braid/bootstrap.h"
#include "transport/factory.h"
#include "transport/multirank.h"
#include "transport/transport_check.h"

namespace braid {
namespace {

using testing::ForkResult;
using testing::ForkShared;
using testing::report;
using testing::runForked;
using testing::waitFor;
using testing::waitForAll;

// UCX's transports for the tests: TCP over loopback works in every container (shared-memory transports need
// /dev/shm and, for large messages, cross-memory attach). An explicit UCX_TLS from the environment wins.
class UcxTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef BRAID_HAVE_UCX
    GTEST_SKIP() << "built without UCX";
#endif
    setenv("UCX_TLS", "tcp,self", /*overwrite=*/0);
  }
};

#ifndef BRAID_HAVE_UCX
// A bootstrap of one rank that is never asked anything (the stub returns before using it).
class UnusedBootstrap : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::vector<std::string>& hostNames() const override { return hosts_; }
  const std::vector<int64_t>& processIds() const override { return pids_; }
  Status allGather(void*, size_t) override { return internalError("unused"); }
  Status barrier() override { return internalError("unused"); }
  Status send(int, int, const void*, size_t) override { return internalError("unused"); }
  Status recv(int, int, void*, size_t) override { return internalError("unused"); }
  Status checkPeers() override { return Status::ok(); }
  void abort(const std::string&) override {}

 private:
  std::vector<std::string> hosts_{"localhost"};
  std::vector<int64_t> pids_{1};
};

TEST(UcxTransportStub, ReportsBuiltWithoutUcx) {
  UnusedBootstrap bootstrap;
  Result<std::unique_ptr<DataTransport>> created = createUcxTransport(bootstrap, TransportOptions{});
  EXPECT_EQ(created.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(created.status().message(), "built without UCX");
}
#endif

TEST(UcxTag, FieldsDoNotOverlap) {
  // Hand-computed: rank 5 << 44, channel 3 << 28, sequence 9; the sequence wraps at 2^28.
  EXPECT_EQ(ucx::messageTag(5, 3, 9), (uint64_t{5} << 44) | (uint64_t{3} << 28) | 9u);
  EXPECT_EQ(ucx::messageTag(1, 0, (uint64_t{1} << 28) + 4), (uint64_t{1} << 44) | 4u);
  EXPECT_EQ(ucx::messageTag((1 << 20) - 1, (1 << 16) - 1, (uint64_t{1} << 28) - 1), ~uint64_t{0});
}

TEST_F(UcxTransportTest, CollectivesBetweenProcesses) {
  for (int n : {2, 3, 4}) {
    const ForkResult result = testing::forkCollectives(&createUcxTransport, n);
    EXPECT_TRUE(result.allOk()) << n << " ranks:\n" << result.summary();
  }
}

// Sends complete before their receives are posted, also large ones (rendezvous inside UCX) and more of them
// than fifo_depth (the ones beyond wait, uncopied, for room and complete once earlier ones finished); then
// everything arrives intact and in order per channel, zero-byte messages included.
TEST_F(UcxTransportTest, BufferedSendsAndOrder) {
  ForkShared<UniqueId> id;
  const ForkResult result = runForked(
      2,
      [&](int rank) -> int {
        TransportOptions options;
        options.timeout_s = 20;
        options.fifo_depth = 2;
        return testing::withEndpoint(
            id, rank, 2, &createUcxTransport, options, [&](Bootstrap& bootstrap, DataTransport& t) {
              std::vector<uint8_t> input(3 << 20), output(3 << 20, 0);
              for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint8_t>(i * 29 + 5 + rank);
              RankMemory memory{input.data(), input.size(), output.data(), output.size(), nullptr, 0};
              if (report(rank, "bind", t.bind(rank, memory, ReduceSpec{}))) return 1;
              // (channel, offset, bytes) from rank 0 to rank 1 in posting order: the first two fit fifo_depth 2 and
              // complete before rank 1 posts anything.
              const struct {
                int channel;
                uint64_t offset, bytes;
              } messages[] = {{4, 0, 1 << 20},
                              {4, 1 << 20, 1 << 20},
                              {4, 2 << 20, 0},
                              {9, 2 << 20, 100},
                              {4, (2 << 20) + 100, 7},
                              {9, (2 << 20) + 107, 500000},
                              {65535, (2 << 20) + 500107, 1}};
              if (rank == 0) {
                std::vector<RequestId> first;
                for (int m = 0; m < 2; ++m) {
                  auto posted =
                      t.postSend(SendRequest{0,
                                             1,
                                             messages[m].channel,
                                             BufferRef{BufferKind::kInput, messages[m].offset, messages[m].bytes},
                                             {}});
                  if (!posted.isOk()) return report(rank, "postSend", posted.status());
                  first.push_back(*posted);
                }
                if (report(rank, "first sends", waitForAll(t, first))) return 1;
                std::fill(input.begin(), input.begin() + (2 << 20), 0);  // the sends' bytes were copied already
                if (report(rank, "barrier", bootstrap.barrier())) return 1;
                std::vector<RequestId> rest;
                for (size_t m = 2; m < std::size(messages); ++m) {
                  auto posted =
                      t.postSend(SendRequest{0,
                                             1,
                                             messages[m].channel,
                                             BufferRef{BufferKind::kInput, messages[m].offset, messages[m].bytes},
                                             {}});
                  if (!posted.isOk()) return report(rank, "postSend", posted.status());
                  rest.push_back(*posted);
                }
                if (report(rank, "sends", waitForAll(t, rest))) return 1;
              } else {
                if (report(rank, "barrier", bootstrap.barrier())) return 1;
                std::vector<RequestId> ids;
                for (const auto& m : messages) {
                  auto posted =
                      t.postRecv(RecvRequest{1, 0, m.channel, BufferRef{BufferKind::kOutput, m.offset, m.bytes}, {}});
                  if (!posted.isOk()) return report(rank, "postRecv", posted.status());
                  ids.push_back(*posted);
                }
                if (report(rank, "receives", waitForAll(t, ids))) return 1;
                for (uint64_t i = 0; i < (2u << 20) + 500108; ++i) {
                  const uint8_t want = static_cast<uint8_t>(i * 29 + 5);  // rank 0's original input byte i
                  if (output[i] != want) {
                    std::fprintf(stderr, "output[%llu] = %d, expected %d\n", static_cast<unsigned long long>(i),
                                 output[i], want);
                    return 1;
                  }
                }
                // Channels beyond the tag's 16 bits are refused, naming the limit.
                const Status wide =
                    t.postRecv(RecvRequest{1, 0, 1 << 16, BufferRef{BufferKind::kOutput, 0, 0}, {}}).status();
                if (wide.code() != StatusCode::kUnsupported) return report(rank, "channel 65536", wide);
              }
              // Keep rank 0's worker alive until rank 1 received everything (its last sends may still be in flight).
              return report(rank, "final barrier", bootstrap.barrier());
            });
      },
      /*timeout_s=*/60);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// A 4 MiB send (rendezvous inside UCX) completes to the executor at once; the sender then stays out of the
// transport (bootstrap barriers) and its progress thread must carry the transfer.
TEST_F(UcxTransportTest, BufferedSendCompletesWhileSenderIsIdle) {
  TransportOptions options;
  options.timeout_s = 20;
  const ForkResult result = testing::forkIdleSender(&createUcxTransport, options, 4 << 20);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST_F(UcxTransportTest, SizeMismatchNamesBothSizes) {
  ForkResult result = testing::forkSizeMismatch(
      &createUcxTransport, 4, 8, "rank 0 -> rank 1 channel 0: a message of 4 bytes matched a receive of 8 bytes");
  EXPECT_TRUE(result.allOk()) << result.summary();
  // Longer than the receive: UCX truncates and cannot say by how much.
  result = testing::forkSizeMismatch(&createUcxTransport, 8, 4,
                                     "rank 0 -> rank 1 channel 0: a message of more than 4 bytes matched a receive "
                                     "of 4 bytes");
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST_F(UcxTransportTest, TimeoutNamesWhatIsAwaited) {
  const ForkResult result = testing::forkTimeout(&createUcxTransport);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST_F(UcxTransportTest, AbortReachesWaitingPeer) {
  const ForkResult result = testing::forkAbort(&createUcxTransport);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Rank 2 of 4 is SIGKILLed in the middle of a 16 MiB ring all-reduce (at its 20th of 48 sends): every other
// rank's execute() returns kRemoteError naming rank 2, within seconds although the timeout is 30 s.
TEST_F(UcxTransportTest, KilledRankFailsThePeers) { testing::expectKilledRankFailsPeers(&createUcxTransport); }

// Benchmark, run with --gtest_also_run_disabled_tests: 4 processes, ring all-reduce of 64 MiB fp32.
TEST_F(UcxTransportTest, DISABLED_RingAllReduce64MiBBusBw) {
  testing::runRingAllReduce64MiBBusBw(&createUcxTransport, "ucx");
}

}  // namespace
}  // namespace braid
