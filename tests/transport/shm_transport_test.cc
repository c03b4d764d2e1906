// The shared-memory transport (runtime/transport/shm/): classical collectives between forked processes
// (2, 3, 4 ranks) and between threads of one process, checked against a naive reference (transport_check.h);
// the DataTransport contract's buffering, size-mismatch, timeout, abort and killed-rank behaviour.
#include "transport/shm/shm_transport.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
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

constexpr double kSetupTimeoutS = 20;

TEST(ShmLayout, RingsArePageAlignedAndDisjoint) {
  Result<shm::SegmentLayout> layout = shm::SegmentLayout::make(3, 8, 1000);
  ASSERT_TRUE(layout.isOk()) << layout.status().toString();
  // Hand-computed: counters 128 B + 8 descriptors of 16 B = 256 B -> data at 4096; slots of 1000 B padded to
  // 1024; ring = 4096 + 8 * 1024 = 12288 B (page-aligned). Directory of 3 * 128 keys of 4 B after page 0.
  EXPECT_EQ(layout->directory_offset, 4096u);
  EXPECT_EQ(layout->rings_offset, 4096u + 4096u);  // 1536 directory bytes round up to one page
  EXPECT_EQ(layout->ring_data_offset, 4096u);
  EXPECT_EQ(layout->slot_stride, 1024u);
  EXPECT_EQ(layout->ring_bytes, 12288u);
  EXPECT_EQ(layout->total_bytes, 8192u + 3u * shm::kRingsPerPair * 12288u);
  EXPECT_EQ(layout->ringOffset(1, 0), 8192u + shm::kRingsPerPair * 12288u);
  EXPECT_EQ(layout->ringOffset(2, shm::kRingsPerPair - 1) + layout->ring_bytes, layout->total_bytes);
  EXPECT_EQ(shm::SegmentLayout::make(2, 0, 4096).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shm::SegmentLayout::make(2, 8, 0).status().code(), StatusCode::kInvalidArgument);
  // 1024 ranks with 1 TiB slots cannot fit in the address space: an error naming the numbers, not a crash.
  const Status huge = shm::SegmentLayout::make(1024, 8, uint64_t{1} << 40).status();
  EXPECT_EQ(huge.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.message().find("1024 ranks"), std::string::npos) << huge.message();
}

// Every standard case (transport_check.h) on 2, 3 and 4 processes over one endpoint each.
TEST(ShmTransport, CollectivesBetweenProcesses) {
  for (int n : {2, 3, 4}) {
    const ForkResult result = testing::forkCollectives(&createShmTransport, n);
    EXPECT_TRUE(result.allOk()) << n << " ranks:\n" << result.summary();
  }
}

// Segments are unlinked once every rank mapped them: after setup nothing named after this communicator's rank
// 0 is left in /dev/shm, and the transport still works.
TEST(ShmTransport, SegmentsAreUnlinkedAfterSetup) {
  ForkShared<UniqueId> id;
  const ForkResult result = runForked(
      3,
      [&](int rank) -> int {
        TransportOptions options;
        options.timeout_s = 20;
        return testing::withEndpoint(
            id, rank, 3, &createShmTransport, options, [&](Bootstrap& bootstrap, DataTransport& endpoint) {
              const std::string pid0 = std::to_string(bootstrap.processIds()[0]);
              if (shm::segmentName(bootstrap.processIds()[0], 0x1234, 2) !=
                  "/braid-shm-" + pid0 + "-0000000000001234-2") {
                std::fprintf(stderr, "unexpected segment name %s\n",
                             shm::segmentName(bootstrap.processIds()[0], 0x1234, 2).c_str());
                return 1;
              }
              const std::string prefix = "braid-shm-" + pid0 + "-";
              // Every rank unlinks its own segment when setup returns on it: wait until all have returned.
              if (report(rank, "barrier", bootstrap.barrier())) return 1;
              DIR* dir = opendir("/dev/shm");
              if (dir == nullptr) return 0;  // no /dev/shm listing on this system: nothing to check
              int left = 0;
              while (dirent* entry = readdir(dir)) {
                if (std::string(entry->d_name).rfind(prefix, 0) == 0) {
                  std::fprintf(stderr, "rank %d: /dev/shm/%s is still there\n", rank, entry->d_name);
                  ++left;
                }
              }
              closedir(dir);
              if (left > 0) return 1;
              return report(rank, "ring all-reduce",
                            testing::runCase(endpoint, rank, 3,
                                             {ClassicAlgo::kRing, CollectiveKind::kAllReduce, 1001, false, 1}));
            });
      },
      /*timeout_s=*/60);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Ranks as threads of one process (each with its own bootstrap and endpoint): the same segments are then
// mapped twice in one address space and the futex doorbells must still wake the right thread.
TEST(ShmTransport, CollectivesBetweenThreads) {
  const ForkResult result = runForked(
      1,
      [](int) -> int {
        constexpr int n = 3;
        Result<UniqueId> id = createUniqueId("127.0.0.1:0");
        if (!id.isOk()) return report(0, "createUniqueId", id.status());
        std::vector<int> failures(n, 0);
        std::vector<std::thread> threads;
        for (int r = 0; r < n; ++r) {
          threads.emplace_back([&, r] {
            BootstrapOptions boot_options;
            boot_options.timeout_s = kSetupTimeoutS;
            auto bootstrap = connectBootstrap(*id, r, n, boot_options);
            if (!bootstrap.isOk()) {
              failures[r] = report(r, "bootstrap", bootstrap.status());
              return;
            }
            TransportOptions options;
            options.timeout_s = 30;
            auto endpoint = createShmTransport(**bootstrap, options);
            if (!endpoint.isOk()) {
              failures[r] = report(r, "createShmTransport", endpoint.status());
              return;
            }
            for (testing::CollectiveCase c :
                 {testing::CollectiveCase{ClassicAlgo::kRing, CollectiveKind::kAllReduce, 300007, false, 1},
                  testing::CollectiveCase{ClassicAlgo::kPairwise, CollectiveKind::kAllToAll, 1001, false, 1}}) {
              failures[r] += report(r, c.describe().c_str(), testing::runCase(**endpoint, r, n, c));
            }
          });
        }
        for (auto& t : threads) t.join();
        int failed = 0;
        for (int f : failures) failed += f;
        return failed;
      },
      /*timeout_s=*/60);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Buffering: a message larger than the whole ring completes before its receive is posted (private copy);
// multi-slot messages, zero-byte messages and channel ids far beyond a dense range (hash probing) arrive
// intact and in order; a 129th channel between one pair is kUnsupported; a bad range is kInvalidArgument.
TEST(ShmTransport, BufferingFragmentsAndChannels) {
  ForkShared<UniqueId> id;
  const ForkResult result = runForked(
      2,
      [&](int rank) -> int {
        auto bootstrap = testing::childBootstrap(id, rank, 2, kSetupTimeoutS);
        if (!bootstrap.isOk()) return report(rank, "bootstrap", bootstrap.status());
        TransportOptions options;
        options.timeout_s = 20;
        options.slot_bytes = 4096;
        options.fifo_depth = 2;  // ring: 8192 bytes of data
        auto created = createShmTransport(**bootstrap, options);
        if (!created.isOk()) return report(rank, "createShmTransport", created.status());
        DataTransport& t = **created;
        std::vector<uint8_t> input(200000), output(200000, 0);
        for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint8_t>(i * 31 + 7 + rank);
        RankMemory memory{input.data(), input.size(), output.data(), output.size(), nullptr, 0};
        if (report(rank, "bind", t.bind(rank, memory, ReduceSpec{}))) return 1;
        // (channel, offset, bytes) of each message from rank 0 to rank 1, in posting order.
        const struct {
          int channel;
          uint64_t offset, bytes;
        } messages[] = {{3, 0, 100000},    {3, 100000, 5000},    {3, 105000, 0},       {1000, 105000, 3},
                        {7, 105003, 8192}, {1000, 113195, 4097}, {3 + 128, 117292, 11}};
        if (rank == 0) {
          // Out of range: nothing is posted.
          Result<RequestId> bad =
              t.postSend(SendRequest{0, 1, 3, BufferRef{BufferKind::kInput, 199999, 2}, Protocol::kSimple});
          if (bad.isOk() || bad.status().code() != StatusCode::kInvalidArgument ||
              bad.status().message().find("send src") == std::string::npos) {
            std::fprintf(stderr, "out-of-range send: %s\n", bad.status().toString().c_str());
            return 1;
          }
          auto first = t.postSend(
              SendRequest{0, 1, messages[0].channel, BufferRef{BufferKind::kInput, 0, messages[0].bytes}, {}});
          if (!first.isOk()) return report(rank, "postSend", first.status());
          // Completes although rank 1 has not posted its receive (it waits at the barrier below).
          if (report(rank, "first send", waitFor(t, *first))) return 1;
          if (report(rank, "barrier", (*bootstrap)->barrier())) return 1;
          std::vector<RequestId> ids;
          for (size_t m = 1; m < std::size(messages); ++m) {
            auto posted = t.postSend(SendRequest{
                0, 1, messages[m].channel, BufferRef{BufferKind::kInput, messages[m].offset, messages[m].bytes}, {}});
            if (!posted.isOk()) return report(rank, "postSend", posted.status());
            ids.push_back(*posted);
          }
          if (report(rank, "sends", waitForAll(t, ids))) return 1;
        } else {
          if (report(rank, "barrier", (*bootstrap)->barrier())) return 1;
          std::vector<RequestId> ids;
          for (const auto& m : messages) {
            auto posted =
                t.postRecv(RecvRequest{1, 0, m.channel, BufferRef{BufferKind::kOutput, m.offset, m.bytes}, {}});
            if (!posted.isOk()) return report(rank, "postRecv", posted.status());
            ids.push_back(*posted);
          }
          if (report(rank, "receives", waitForAll(t, ids))) return 1;
          for (uint64_t i = 0; i < 117303; ++i) {
            const uint8_t want = static_cast<uint8_t>(i * 31 + 7);  // rank 0's input byte i
            if (output[i] != want) {
              std::fprintf(stderr, "output[%llu] = %d, expected %d\n", static_cast<unsigned long long>(i), output[i],
                           want);
              return 1;
            }
          }
          // 2 channels above use probes of one key each besides 3 / 131 / 1000 / 7: fill the directory.
          int claimed = 4;  // channels 3, 131 (3 + 128: next probe), 1000, 7
          Status status = Status::ok();
          for (int channel = 2000; status.isOk(); ++channel, ++claimed) {
            status = t.postRecv(RecvRequest{1, 0, channel, BufferRef{BufferKind::kOutput, 0, 0}, {}}).status();
          }
          if (status.code() != StatusCode::kUnsupported || claimed != shm::kRingsPerPair + 1) {
            std::fprintf(stderr, "after %d channels: %s\n", claimed, status.toString().c_str());
            return 1;
          }
        }
        return 0;
      },
      /*timeout_s=*/60);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// A send larger than the whole ring completes at once (private copy) and then streams in the background
// while the sender sits in a bootstrap barrier without calling the transport.
TEST(ShmTransport, OversizedSendStreamsWhileSenderIsIdle) {
  TransportOptions options;
  options.timeout_s = 20;
  options.slot_bytes = 4096;
  options.fifo_depth = 2;
  const ForkResult result = testing::forkIdleSender(&createShmTransport, options, 100000);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// A message matched with a receive of another size: kInvalidArgument naming both ranks and sizes, whether
// the message is shorter or longer than the receive.
TEST(ShmTransport, SizeMismatchNamesBothSizes) {
  ForkResult result = testing::forkSizeMismatch(&createShmTransport, 8, 4,
                                                "rank 0 -> rank 1 channel 0: a message of 8 bytes matched a receive "
                                                "of 4 bytes");
  EXPECT_TRUE(result.allOk()) << result.summary();
  result = testing::forkSizeMismatch(&createShmTransport, 4, 8,
                                     "rank 0 -> rank 1 channel 0: a message of 4 bytes matched a receive of 8 bytes");
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST(ShmTransport, TimeoutNamesWhatIsAwaited) {
  const ForkResult result = testing::forkTimeout(&createShmTransport);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST(ShmTransport, AbortReachesWaitingPeer) {
  const ForkResult result = testing::forkAbort(&createShmTransport);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Rank 2 of 4 is SIGKILLed in the middle of a 16 MiB ring all-reduce (at its 20th of 48 sends): every other
// rank's execute() returns kRemoteError naming rank 2, within seconds although the timeout is 30 s.
TEST(ShmTransport, KilledRankFailsThePeers) { testing::expectKilledRankFailsPeers(&createShmTransport); }

// Benchmark, run with --gtest_also_run_disabled_tests: 4 processes, ring all-reduce of 64 MiB fp32.
TEST(ShmTransport, DISABLED_RingAllReduce64MiBBusBw) {
  testing::runRingAllReduce64MiBBusBw(&createShmTransport, "shm");
}

}  // namespace
}  // namespace braid
