// What only the shared-memory transport (runtime/transport/shm/) has: its segment layout, segments unlinked after
// setup, messages fragmented over slots, private copies of messages larger than the ring, and the per-pair
// channel directory. The DataTransport contract itself is conformance_test.cc's.
#include "transport/shm/shm_transport.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "braid/bootstrap.h"
#include "transport/factory.h"
#include "transport/multirank.h"
#include "transport/transport_check.h"

namespace braid {
namespace {

using testing::ForkResult;
using testing::report;

const testing::TransportUnderTest kShm{"shm", &createShmTransport, false, 0, nullptr};

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

// Segments are unlinked once every rank mapped them: after setup nothing named after this communicator's rank
// 0 is left in /dev/shm, and the transport still works.
TEST(ShmTransport, SegmentsAreUnlinkedAfterSetup) {
  TransportOptions options;
  options.timeout_s = 20;
  const ForkResult result = testing::runRanks(
      kShm, 3, options,
      [](int rank, Bootstrap& bootstrap, DataTransport& endpoint) -> int {
        const std::string pid0 = std::to_string(bootstrap.processIds()[0]);
        if (shm::segmentName(bootstrap.processIds()[0], 0x1234, 2) != "/braid-shm-" + pid0 + "-0000000000001234-2") {
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
        return report(
            rank, "ring all-reduce",
            testing::runCase(endpoint, rank, 3, {ClassicAlgo::kRing, CollectiveKind::kAllReduce, 1001, false, 1}));
      },
      /*timeout_s=*/60);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Buffering: a message larger than the whole ring (8 KiB) completes before its receive is posted (private
// copy); multi-slot messages, zero-byte messages and channel ids far beyond a dense range (hash probing) arrive
// intact and in order; a bad range is kInvalidArgument; a 129th channel between one pair is kUnsupported.
TEST(ShmTransport, BufferingFragmentsAndChannels) {
  TransportOptions options;
  options.timeout_s = 20;
  options.slot_bytes = 4096;
  options.fifo_depth = 2;
  const std::vector<testing::ExchangeMessage> messages = {{3, 0, 100000},       {3, 100000, 5000}, {3, 105000, 0},
                                                          {1000, 105000, 3},    {7, 105003, 8192}, {1000, 113195, 4097},
                                                          {3 + 128, 117292, 11}};
  const ForkResult result = testing::forkSendAheadExchange(
      kShm, options, messages, /*early=*/1, [](int rank, Bootstrap&, DataTransport& t) -> int {
        if (rank == 0) {  // past the 117303-byte input: nothing is posted
          const Status bad = t.postSend(SendRequest{0, 1, 3, BufferRef{BufferKind::kInput, 117302, 2}, {}}).status();
          if (bad.code() != StatusCode::kInvalidArgument || bad.message().find("send src") == std::string::npos) {
            return report(rank, "out-of-range send", bad.isOk() ? internalError("accepted") : bad);
          }
          return 0;
        }
        // Channels 3, 131 (3 + 128: the next probe), 1000 and 7 hold keys: fill the rest of the directory.
        int claimed = 4;
        Status status = Status::ok();
        for (int channel = 2000; status.isOk(); ++channel, ++claimed) {
          status = t.postRecv(RecvRequest{1, 0, channel, BufferRef{BufferKind::kOutput, 0, 0}, {}}).status();
        }
        if (status.code() != StatusCode::kUnsupported || claimed != shm::kRingsPerPair + 1) {
          std::fprintf(stderr, "after %d channels: %s\n", claimed, status.toString().c_str());
          return 1;
        }
        return 0;
      });
  EXPECT_TRUE(result.allOk()) << result.summary();
}

}  // namespace
}  // namespace braid
