// Receiver admission in the net plugin's TCP data path (runtime/nccl/net/admission.h, BRAID_CC_POLICY=adaptive):
// the Admission object alone, and an incast of three senders into one receiver that starts gated, every byte
// checked, driven as NCCL's proxy drives the plugin (several requests in flight, all of them polled).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nccl/net_harness.h"
#include "net/admission.h"
#include "net/handle.h"
#include "transport/multirank.h"

namespace braid::testing {
namespace {

using nccl_plugin::Admission;

congestion::Config adaptiveConfig(int credits, int admit_start, uint64_t grant) {
  congestion::Config config;
  config.policy = congestion::Policy::kAdaptive;
  config.credits = credits;
  config.admit_start = admit_start;
  config.grant_bytes = grant;
  return config;
}

uint64_t sum(const std::vector<uint64_t>& v) {
  uint64_t s = 0;
  for (uint64_t x : v) s += x;
  return s;
}

TEST(NetAdmission, OpenGrantsInFullAndTellsTheModeOnce) {
  Admission admission(adaptiveConfig(1, 0, 1 << 20));
  const int a = admission.join();
  const int b = admission.join();
  uint64_t epoch_a = ~uint64_t{0};
  Admission::Mail first = admission.take(a, &epoch_a);
  EXPECT_TRUE(first.mode_changed);
  EXPECT_TRUE(first.open);
  EXPECT_TRUE(first.grants.empty());
  admission.request(a, 3 << 20);  // open: in full, beyond the grant size
  Admission::Mail mail = admission.take(a, &epoch_a);
  EXPECT_FALSE(mail.mode_changed);
  EXPECT_EQ(mail.grants, std::vector<uint64_t>{3 << 20});
  uint64_t epoch_b = epoch_a;
  EXPECT_TRUE(admission.take(b, &epoch_b).grants.empty());
  EXPECT_TRUE(admission.received(a, 3 << 20).isOk());
  EXPECT_FALSE(admission.received(a, 1).isOk());  // more than was granted
}

TEST(NetAdmission, ATimeoutReportGatesAndGrantsRotate) {
  constexpr uint64_t kGrant = 256 << 10;
  Admission admission(adaptiveConfig(1, 0, kGrant));
  std::vector<int> senders;
  std::vector<uint64_t> epochs(4, ~uint64_t{0});
  for (int i = 0; i < 4; ++i) senders.push_back(admission.join());
  for (int i = 0; i < 4; ++i) (void)admission.take(senders[i], &epochs[i]);
  admission.report(senders[0], 1);  // half of the 4 live senders stay admitted
  EXPECT_FALSE(admission.open());
  for (int i = 0; i < 4; ++i) {
    Admission::Mail mail = admission.take(senders[i], &epochs[i]);
    EXPECT_TRUE(mail.mode_changed) << i;
    EXPECT_FALSE(mail.open) << i;
  }
  for (int i = 0; i < 4; ++i) admission.request(senders[i], 1 << 20);
  // Two senders hold a grant of kGrant; the others wait.
  std::vector<uint64_t> granted(4);
  int holding = 0;
  for (int i = 0; i < 4; ++i) {
    granted[i] = sum(admission.take(senders[i], &epochs[i]).grants);
    EXPECT_LE(granted[i], kGrant);
    holding += granted[i] > 0 ? 1 : 0;
  }
  EXPECT_EQ(holding, 2);
  // The holders' data arrives: their credit passes on, until every sender got its 1 MiB.
  std::vector<uint64_t> total = granted;
  for (int round = 0; round < 64; ++round) {
    for (int i = 0; i < 4; ++i) {
      if (granted[i] > 0) {
        ASSERT_TRUE(admission.received(senders[i], granted[i]).isOk());
      }
      granted[i] = 0;
    }
    for (int i = 0; i < 4; ++i) {
      granted[i] = sum(admission.take(senders[i], &epochs[i]).grants);
      total[i] += granted[i];
    }
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(total[i], uint64_t{1} << 20) << i;
}

TEST(NetAdmission, PartsAreAQuarterGrantAtMost) {
  EXPECT_EQ(nccl_plugin::creditedPartBytes(512 << 10, 2, 1 << 20), size_t{256} << 10);
  EXPECT_EQ(nccl_plugin::creditedPartBytes(4 << 20, 2, 1 << 20), size_t{256} << 10);
  EXPECT_EQ(nccl_plugin::creditedPartBytes(100 << 10, 2, 1 << 20), size_t{64} << 10);  // the data path's chunk
  EXPECT_EQ(nccl_plugin::creditedPartBytes(4 << 20, 1, 64 << 10), size_t{16} << 10);
}

// Rank 0 receives from ranks 1..3 (8 receives in flight per sender, all polled); each sender sends kMessages
// messages of the sizes below with 8 in flight. The receiver starts gated at one sender (BRAID_CC_ADMIT=1) with
// 256 KiB grants, so large messages travel on credit until admission opens. The data sockets use TCP reno.
TEST(NetAdmission, IncastIntoAGatedReceiverEveryByteRight) {
  constexpr int kRanks = 4;
  constexpr int kMessages = 24;
  constexpr int kInFlight = 8;
  const std::vector<size_t> sizes = {1000, 65536, 65537, 300000, 512 << 10, (1 << 20) + 5, 4 << 20};
  HandlePipes pipes(kRanks);
  ForkResult r = runForked(
      kRanks,
      [&](int rank) {
        setenv("BRAID_NET_IF", "lo", 1);
        setenv("BRAID_NET_TRANSPORT", "tcp", 1);
        setenv("BRAID_CC_POLICY", "adaptive", 1);
        setenv("BRAID_CC_ADMIT", "1", 1);
        setenv("BRAID_CC_CREDITS", "1", 1);
        setenv("BRAID_CC_GRANT", "256K", 1);
        setenv("BRAID_TCP_CONGESTION", "reno", 1);  // every kernel has it: the data sockets' setsockopt path
        LoadedNetPlugin p = openNetPlugin(pluginPath(), 11);
        BRAID_CHILD_CHECK(p.version == 11);
        NetApi api(p.version, p.table);
        BRAID_CHILD_CHECK(api.init(0x5150 + rank, &captureLog) == 0);
        // Message 0 is a hello of 8 bytes naming the sender (the receiver cannot tell its comms apart otherwise).
        auto sizeOf = [&](int k) { return k == 0 ? size_t{8} : sizes[static_cast<size_t>(k) % sizes.size()]; };
        const size_t largest = 4 << 20;
        if (rank == 0) {
          char handle[abi::kNetHandleMaxSize] = {};
          void* listen = nullptr;
          BRAID_CHILD_CHECK(api.listen(0, handle, &listen) == 0 && listen != nullptr);
          for (int s = 1; s < kRanks; ++s) BRAID_CHILD_CHECK(pipes.send(0, handle));
          std::vector<void*> recvs(kRanks - 1, nullptr);
          for (void*& comm : recvs) BRAID_CHILD_CHECK(api.accept(listen, &comm) == 0 && comm != nullptr);
          // Which sender a comm belongs to: its first message's tag names it.
          std::vector<std::vector<std::vector<uint8_t>>> bufs(recvs.size());
          std::vector<std::vector<void*>> reqs(recvs.size(), std::vector<void*>(kMessages, nullptr));
          std::vector<int> posted(recvs.size(), 0), done(recvs.size(), 0), sender(recvs.size(), -1);
          for (auto& b : bufs) b.assign(kMessages, std::vector<uint8_t>(largest));
          const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(40);
          int finished = 0;
          while (finished < static_cast<int>(recvs.size()) * kMessages && std::chrono::steady_clock::now() < end) {
            for (size_t c = 0; c < recvs.size(); ++c) {
              while (posted[c] < kMessages && posted[c] - done[c] < kInFlight) {
                void* data = bufs[c][posted[c]].data();
                size_t cap = largest;
                int tag = 0;
                void* req = nullptr;
                BRAID_CHILD_CHECK(api.irecv(recvs[c], 1, &data, &cap, &tag, nullptr, &req) == 0);
                if (req == nullptr) break;
                reqs[c][posted[c]++] = req;
              }
              while (done[c] < posted[c]) {
                int complete = 0, got = -1;
                BRAID_CHILD_CHECK(api.test(reqs[c][done[c]], &complete, &got) == 0);
                if (!complete) break;
                const int k = done[c]++;
                ++finished;
                BRAID_CHILD_CHECK(static_cast<size_t>(got) == sizeOf(k));
                if (k == 0) {
                  sender[c] = static_cast<int>(bufs[c][0][0]);
                  BRAID_CHILD_CHECK(sender[c] >= 1 && sender[c] < kRanks);
                  continue;
                }
                const size_t bad = checkPattern(bufs[c][k], sizeOf(k), static_cast<uint64_t>(sender[c]) * 1000 + k);
                if (bad != SIZE_MAX) {
                  std::fprintf(stderr, "sender %d message %d (%zu B): byte %zu differs\n", sender[c], k, sizeOf(k),
                               bad);
                  return 1;
                }
              }
            }
          }
          BRAID_CHILD_CHECK(finished == static_cast<int>(recvs.size()) * kMessages);
          for (void* comm : recvs) BRAID_CHILD_CHECK(api.closeRecv(comm) == 0);
          BRAID_CHILD_CHECK(api.closeListen(listen) == 0);
          // The receiver told its senders it was gated, then opened (growth without timeouts).
          if (g_logged.find("admission for") == std::string::npos || g_logged.find(": gated:") == std::string::npos ||
              g_logged.find(": open:") == std::string::npos) {
            std::fprintf(stderr, "log:\n%s\n", g_logged.c_str());
            return 1;
          }
        } else {
          char handle[abi::kNetHandleMaxSize] = {};
          BRAID_CHILD_CHECK(pipes.receive(0, handle));
          void* send = nullptr;
          BRAID_CHILD_CHECK(api.connect(0, handle, &send) == 0 && send != nullptr);
          std::vector<std::vector<uint8_t>> out(kMessages);
          for (int k = 0; k < kMessages; ++k) {
            out[k].resize(sizeOf(k));
            fillPattern(out[k], sizeOf(k), static_cast<uint64_t>(rank) * 1000 + k);
          }
          out[0].assign(8, 0);
          out[0][0] = static_cast<uint8_t>(rank);
          std::vector<void*> reqs(kMessages, nullptr);
          int posted = 0, done = 0;
          const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(40);
          while (done < kMessages && std::chrono::steady_clock::now() < end) {
            while (posted < kMessages && posted - done < kInFlight) {
              void* req = nullptr;
              BRAID_CHILD_CHECK(api.isend(send, out[posted].data(), out[posted].size(), 0, nullptr, &req) == 0);
              if (req == nullptr) break;
              reqs[posted++] = req;
            }
            int complete = 0, got = -1;
            BRAID_CHILD_CHECK(api.test(reqs[done], &complete, &got) == 0);
            if (complete) {
              BRAID_CHILD_CHECK(static_cast<size_t>(got) == sizeOf(done));
              ++done;
            }
          }
          BRAID_CHILD_CHECK(done == kMessages);
          BRAID_CHILD_CHECK(api.closeSend(send) == 0);
        }
        BRAID_CHILD_CHECK(api.finalize() == 0);
        return 0;
      },
      60);
  EXPECT_TRUE(r.allOk()) << r.summary();
}

}  // namespace
}  // namespace braid::testing
