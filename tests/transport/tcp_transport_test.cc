// What only the TCP transport (runtime/transport/tcp/) has: close frames, so that a message sent before a peer
// destroyed its endpoint is still received and only what waits for that peer fails; the receiver's credits (an
// incast of three senders served one at a time, every byte checked; a send beyond the eager size waits for its
// receiver's grant, and a timeout says so). The DataTransport contract itself (unexpected-message buffering
// included: 64 MiB both ways before either receive is posted), under each congestion policy, is
// conformance_test.cc's.
#include "transport/tcp/tcp_transport.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "transport/factory.h"
#include "transport/multirank.h"
#include "transport/transport_check.h"

namespace braid {
namespace {

using testing::ForkResult;

BufferRef ref(BufferKind kind, uint64_t offset, uint64_t bytes) { return BufferRef{kind, offset, bytes}; }

// Rank 1 sends one message and destroys its endpoint (a close frame, then EOF): rank 0 still receives that
// message; its next receive from rank 1 fails naming the close.
TEST(TcpTransport, ReceiveFromAClosedPeerFails) {
  testing::ForkShared<UniqueId> id;
  const ForkResult result = testing::runForked(
      2,
      [&](int rank) {
        auto bootstrap = testing::childBootstrap(id, rank, 2, /*timeout_s=*/20);
        BRAID_CHILD_CHECK_OK(bootstrap);
        TransportOptions options;
        options.timeout_s = 20;
        auto created = createTcpTransport(**bootstrap, options);
        BRAID_CHILD_CHECK_OK(created);
        std::unique_ptr<DataTransport> t = std::move(*created);
        std::vector<uint8_t> buffer(64);
        BRAID_CHILD_CHECK_OK(t->bind(rank, RankMemory{buffer.data(), 64, buffer.data(), 64, nullptr, 0}, {}));
        if (rank == 1) {
          BRAID_CHILD_CHECK_OK(t->postSend(SendRequest{1, 0, 0, ref(BufferKind::kInput, 0, 8)}));
          std::vector<Completion> done;
          BRAID_CHILD_CHECK_OK(t->poll(&done, true));
          t.reset();  // a normal close
          usleep(300 * 1000);
          return 0;
        }
        std::vector<RequestId> seen;
        auto first = t->postRecv(RecvRequest{0, 1, 0, ref(BufferKind::kOutput, 0, 8)});
        BRAID_CHILD_CHECK_OK(first);
        BRAID_CHILD_CHECK_OK(testing::waitCollecting(*t, *first, &seen));
        usleep(100 * 1000);
        auto second = t->postRecv(RecvRequest{0, 1, 0, ref(BufferKind::kOutput, 0, 8)});
        Status status = second.status();
        std::vector<Completion> done;
        if (status.isOk()) status = t->poll(&done, true);
        const bool named_close = status.code() == StatusCode::kRemoteError &&
                                 status.message().find("closed its endpoint") != std::string::npos;
        return named_close
                   ? 0
                   : testing::report(rank, "receive after the close", status.isOk() ? internalError("ok") : status);
      },
      30);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

// Sets BRAID_CC_* variables in the test process (the forked ranks inherit them) and unsets them afterwards.
class CongestionEnv {
 public:
  CongestionEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      setenv(name, value, 1);
      names_.push_back(name);
    }
  }
  ~CongestionEnv() {
    for (const char* name : names_) unsetenv(name);
  }

 private:
  std::vector<const char*> names_;
};

/// Byte i of what rank `from` sends on `channel` in the incast test.
uint8_t incastByte(int from, int channel, uint64_t i) {
  return static_cast<uint8_t>(i * 7 + static_cast<uint64_t>(from) * 61 + static_cast<uint64_t>(channel) * 13 +
                              (i >> 9));
}

// Ranks 1..3 each send rank 0 a 1 MiB message on channel 0, 300 KiB on channel 1 and a zero-byte message on
// channel 0, all at once, while rank 0 grants one sender at a time in 64 KiB grants (16 KiB chunks): every message
// arrives whole and in order, and the credits rotate among the senders until all is in.
TEST(TcpTransport, OneCreditServesEverySenderOfAnIncast) {
  // Receivers that start gated at one sender (by default they admit every sender until TCP times out), data
  // connections with a 5 ms retransmission timeout floor.
  const CongestionEnv env({{"BRAID_CC_POLICY", "adaptive"},
                           {"BRAID_CC_CREDITS", "1"},
                           {"BRAID_CC_ADMIT", "1"},
                           {"BRAID_TCP_RTO_MIN", "5000"},
                           {"BRAID_CC_GRANT", "64K"},
                           {"BRAID_CC_CHUNK_MIN", "16K"},
                           {"BRAID_CC_CHUNK_MAX", "16K"},
                           {"BRAID_CC_WINDOW", "64K"}});
  constexpr uint64_t kBig = 1 << 20;
  constexpr uint64_t kMid = 300 << 10;
  testing::ForkShared<UniqueId> id;
  const ForkResult result = testing::runForked(
      4,
      [&](int rank) {
        auto bootstrap = testing::childBootstrap(id, rank, 4, /*timeout_s=*/30);
        BRAID_CHILD_CHECK_OK(bootstrap);
        TransportOptions options;
        options.timeout_s = 30;
        auto created = createTcpTransport(**bootstrap, options);
        BRAID_CHILD_CHECK_OK(created);
        std::unique_ptr<DataTransport> t = std::move(*created);
        const uint64_t per_sender = kBig + kMid;
        std::vector<uint8_t> input(per_sender), output(3 * per_sender, 0);
        for (uint64_t i = 0; i < kBig; ++i) input[i] = incastByte(rank, 0, i);
        for (uint64_t i = 0; i < kMid; ++i) input[kBig + i] = incastByte(rank, 1, i);
        BRAID_CHILD_CHECK_OK(
            t->bind(rank, RankMemory{input.data(), input.size(), output.data(), output.size(), nullptr, 0}, {}));
        std::vector<RequestId> ids;
        if (rank == 0) {
          for (int from = 1; from <= 3; ++from) {
            const uint64_t base = (from - 1) * per_sender;
            for (const auto& [channel, offset, bytes] :
                 {std::tuple<int, uint64_t, uint64_t>{0, 0, kBig}, {1, kBig, kMid}, {0, 0, 0}}) {
              auto posted = t->postRecv(RecvRequest{0, from, channel, ref(BufferKind::kOutput, base + offset, bytes)});
              BRAID_CHILD_CHECK_OK(posted);
              ids.push_back(*posted);
            }
          }
        } else {
          for (const auto& [channel, offset, bytes] :
               {std::tuple<int, uint64_t, uint64_t>{0, 0, kBig}, {1, kBig, kMid}, {0, 0, 0}}) {
            auto posted = t->postSend(SendRequest{rank, 0, channel, ref(BufferKind::kInput, offset, bytes)});
            BRAID_CHILD_CHECK_OK(posted);
            ids.push_back(*posted);
          }
        }
        BRAID_CHILD_CHECK_OK(testing::waitForAll(*t, ids));
        for (int from = 1; rank == 0 && from <= 3; ++from) {
          const uint8_t* got = output.data() + (from - 1) * per_sender;
          for (uint64_t i = 0; i < per_sender; ++i) {
            const uint8_t want = i < kBig ? incastByte(from, 0, i) : incastByte(from, 1, i - kBig);
            if (got[i] != want) {
              std::fprintf(stderr, "from rank %d: byte %llu is %d, expected %d\n", from,
                           static_cast<unsigned long long>(i), got[i], want);
              return 1;
            }
          }
        }
        BRAID_CHILD_CHECK_OK((*bootstrap)->barrier());
        return 0;
      },
      60);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

TEST(TcpTransport, ARetransmissionTimeoutFloorOutOfRangeFailsSetupNamingIt) {
  for (const char* value : {"300000", "-1", "5ms"}) {
    const CongestionEnv env({{"BRAID_TCP_RTO_MIN", value}});
    testing::ForkShared<UniqueId> id;
    const ForkResult result = testing::runForked(
        2,
        [&](int rank) {
          auto bootstrap = testing::childBootstrap(id, rank, 2, /*timeout_s=*/20);
          BRAID_CHILD_CHECK_OK(bootstrap);
          TransportOptions options;
          options.timeout_s = 10;
          auto created = createTcpTransport(**bootstrap, options);
          BRAID_CHILD_CHECK(!created.isOk());
          const std::string want = std::string("BRAID_TCP_RTO_MIN=") + value;
          if (created.status().message().find(want) == std::string::npos) {
            std::fprintf(stderr, "setup error: %s\n", created.status().message().c_str());
            return 1;
          }
          return 0;
        },
        30);
    EXPECT_TRUE(result.allOk()) << value << ": " << result.summary();
  }
}

// A send beyond the 64 KiB eager size needs its receiver's grant, which a receiver gives only from inside its
// endpoint: while rank 0 sits in a bootstrap barrier, rank 1's 1 MiB send cannot complete and its blocking poll
// times out naming the missing grant; a 64 KiB send (eager) completes without rank 0.
TEST(TcpTransport, ASendBeyondTheEagerSizeWaitsForTheGatedReceiversGrant) {
  // A receiver that starts gated (BRAID_CC_ADMIT; by default it admits every sender until one reports timeouts).
  const CongestionEnv env({{"BRAID_CC_POLICY", "adaptive"}, {"BRAID_CC_CREDITS", "1"}, {"BRAID_CC_ADMIT", "1"}});
  testing::ForkShared<UniqueId> id;
  const ForkResult result = testing::runForked(
      2,
      [&](int rank) {
        auto bootstrap = testing::childBootstrap(id, rank, 2, /*timeout_s=*/20);
        BRAID_CHILD_CHECK_OK(bootstrap);
        TransportOptions options;
        options.timeout_s = 1;
        auto created = createTcpTransport(**bootstrap, options);
        BRAID_CHILD_CHECK_OK(created);
        std::unique_ptr<DataTransport> t = std::move(*created);
        std::vector<uint8_t> buffer(1 << 20, 1);
        BRAID_CHILD_CHECK_OK(
            t->bind(rank, RankMemory{buffer.data(), buffer.size(), buffer.data(), buffer.size(), nullptr, 0}, {}));
        if (rank == 0) {
          BRAID_CHILD_CHECK_OK((*bootstrap)->barrier());  // rank 1 is done when this returns
          return 0;
        }
        auto eager = t->postSend(SendRequest{1, 0, 0, ref(BufferKind::kInput, 0, 64 << 10)});
        BRAID_CHILD_CHECK_OK(eager);
        BRAID_CHILD_CHECK_OK(testing::waitFor(*t, *eager));
        auto big = t->postSend(SendRequest{1, 0, 0, ref(BufferKind::kInput, 0, 1 << 20)});
        BRAID_CHILD_CHECK_OK(big);
        std::vector<Completion> done;
        const Status waited = t->poll(&done, true);
        BRAID_CHILD_CHECK(done.empty());
        BRAID_CHILD_CHECK(waited.code() == StatusCode::kTimeout);
        if (waited.message().find("waiting for rank 0 to grant credits (1 MiB requested, 0 B granted)") ==
            std::string::npos) {
          std::fprintf(stderr, "timeout message: %s\n", waited.message().c_str());
          return 1;
        }
        BRAID_CHILD_CHECK_OK((*bootstrap)->barrier());
        return 0;
      },
      30);
  EXPECT_TRUE(result.allOk()) << result.summary();
}

}  // namespace
}  // namespace braid
