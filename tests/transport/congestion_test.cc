// The congestion controller (runtime/congestion): its parameters, the fixed policy's NCCL window, the adaptive
// policy's AIMD on losses, delay and incast, the receiver's credits and the sender's active peers. Driven with
// hand-made signals and a hand-made clock (µs); expected values are worked out in the comments.
#include "congestion/congestion.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

namespace braid::congestion {
namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * 1024;

// Sets (or, with nullptr, unsets) the BRAID_CC_* variables for one test and restores the defaults after.
class EnvGuard {
 public:
  ~EnvGuard() {
    for (const std::string& name : set_) unsetenv(name.c_str());
  }
  void set(const char* name, const char* value) {
    setenv(name, value, 1);
    set_.push_back(name);
  }

 private:
  std::vector<std::string> set_;
};

TEST(CongestionConfig, DefaultsAreNcclsFixedChunksAndWindow) {
  Result<Config> config = Config::fromEnvironment();
  ASSERT_TRUE(config.isOk()) << config.status().toString();
  EXPECT_EQ(config->policy, Policy::kFixed);  // docs/congestion.md: adaptive was not faster on emulated hosts
  EXPECT_EQ(config->chunk_min, 64 * KiB);
  EXPECT_EQ(config->chunk_max, 512 * KiB);  // NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8
  EXPECT_EQ(config->window, 4 * MiB);       // 8 steps in flight
  EXPECT_EQ(config->credits, 1);            // adaptive: admission closes down to one sender at the least
  EXPECT_EQ(config->grant_bytes, 1 * MiB);
  EXPECT_EQ(config->active_peers, 0);
  EXPECT_EQ(config->receiverCredits(), 0);  // fixed: none
  EXPECT_EQ(config->toString(), "fixed: chunk 512 KiB, window 4 MiB (8 chunks in flight per connection)");
  EXPECT_EQ(config->eager_bytes, 64 * KiB);
}

TEST(CongestionConfig, ReadsEveryVariableWithSuffixes) {
  EnvGuard env;
  env.set("BRAID_CC_POLICY", "FIXED");
  env.set("BRAID_CC_CHUNK_MIN", "16K");
  env.set("BRAID_CC_CHUNK_MAX", "1M");
  env.set("BRAID_CC_WINDOW", "8M");
  env.set("BRAID_CC_CREDITS", "3");
  env.set("BRAID_CC_GRANT", "256K");
  env.set("BRAID_CC_ACTIVE_PEERS", "0");
  env.set("BRAID_CC_ADMIT", "2");
  Result<Config> config = Config::fromEnvironment();
  ASSERT_TRUE(config.isOk()) << config.status().toString();
  EXPECT_EQ(config->policy, Policy::kFixed);
  EXPECT_EQ(config->admit_start, 2);
  EXPECT_EQ(config->receiverStartAdmission(), 0);  // fixed admits everyone, always
  EXPECT_EQ(config->chunk_min, 16 * KiB);
  EXPECT_EQ(config->chunk_max, 1 * MiB);
  EXPECT_EQ(config->window, 8 * MiB);
  EXPECT_EQ(config->credits, 3);
  EXPECT_EQ(config->grant_bytes, 256 * KiB);
  EXPECT_EQ(config->active_peers, 0);
  // The fixed policy grants nothing and feeds every peer, whatever the adaptive parameters say.
  EXPECT_EQ(config->receiverCredits(), 0);
  EXPECT_EQ(config->senderActivePeers(), 0);
  EXPECT_EQ(config->toString(), "fixed: chunk 1 MiB, window 8 MiB (8 chunks in flight per connection)");
}

TEST(CongestionConfig, AdaptiveReceiversStartOpenUnlessToldToStartGated) {
  Config config = Config{};
  config.policy = Policy::kAdaptive;
  EXPECT_EQ(config.receiverCredits(), 1);
  EXPECT_EQ(config.receiverStartAdmission(), 0);
  EXPECT_EQ(config.toString(),
            "adaptive: chunk 64 KiB..512 KiB, window <= 4 MiB, admission all senders .. at least 1, grant 1 MiB, "
            "active peers all");
  config.credits = 3;
  config.admit_start = 2;
  EXPECT_EQ(config.receiverStartAdmission(), 3);  // never below the floor
  EXPECT_EQ(config.toString(),
            "adaptive: chunk 64 KiB..512 KiB, window <= 4 MiB, admission 3 at the start .. at least 3, grant 1 MiB, "
            "active peers all");
  config.credits = 0;  // no admission control: nothing to start gated
  EXPECT_EQ(config.receiverStartAdmission(), 0);
}

TEST(CongestionConfig, BadValuesNameTheVariable) {
  struct Case {
    const char* name;
    const char* value;
    const char* expected;  // in the message
  };
  const Case cases[] = {
      {"BRAID_CC_POLICY", "aimd", "BRAID_CC_POLICY=aimd: not a policy (fixed, adaptive)"},
      {"BRAID_CC_CHUNK_MIN", "1x", "BRAID_CC_CHUNK_MIN=1x: not a size"},
      {"BRAID_CC_CHUNK_MIN", "1M", "chunk min 1 MiB is above chunk max 512 KiB"},
      {"BRAID_CC_CHUNK_MIN", "512", "chunks must lie in [1 KiB, 64 MiB]"},
      {"BRAID_CC_WINDOW", "256K", "window 256 KiB must lie in [chunk max 512 KiB, 1024 MiB]"},
      {"BRAID_CC_GRANT", "4K", "grant 4 KiB is below chunk min 64 KiB"},
      {"BRAID_CC_CREDITS", "-1", "BRAID_CC_CREDITS=-1: not a count in [0, 1024]"},
      {"BRAID_CC_ACTIVE_PEERS", "two", "BRAID_CC_ACTIVE_PEERS=two: not a count in [0, 1024]"},
      {"BRAID_CC_ADMIT", "2000", "BRAID_CC_ADMIT=2000: not a count in [0, 1024]"},
  };
  for (const Case& c : cases) {
    EnvGuard env;
    env.set(c.name, c.value);
    Result<Config> config = Config::fromEnvironment();
    ASSERT_FALSE(config.isOk()) << c.name << "=" << c.value;
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find(c.expected), std::string::npos) << config.status().message();
    EXPECT_NE(config.status().message().find(c.name), std::string::npos) << config.status().message();
  }
}

Config adaptiveConfig() {
  Config c;
  c.policy = Policy::kAdaptive;
  c.chunk_min = 64 * KiB;
  c.chunk_max = 512 * KiB;
  c.window = 4 * MiB;
  return c;
}

// Commits, writes at `now` and acknowledges `frames` full chunks that took `rtt` µs each, one at a time.
void roundTrips(SenderControl& control, int frames, double* now, double rtt) {
  for (int i = 0; i < frames; ++i) {
    const uint64_t chunk = control.chunkBytes();
    ASSERT_TRUE(control.mayCommit(chunk));
    control.onCommit(chunk);
    control.onWritten(*now);
    *now += rtt;
    ASSERT_TRUE(control.onAck(1, 0, *now).isOk());
  }
}

TEST(SenderControl, FixedKeepsEightStepsOfHalfAMebibyteWhateverItMeasures) {
  Config config = adaptiveConfig();
  config.policy = Policy::kFixed;
  SenderControl control(config);
  EXPECT_EQ(control.chunkBytes(), 512 * KiB);
  EXPECT_EQ(control.windowBytes(), 4 * MiB);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(control.mayCommit(512 * KiB)) << i;
    control.onCommit(512 * KiB);
  }
  EXPECT_FALSE(control.mayCommit(1));  // the 9th step waits for an acknowledgement
  EXPECT_EQ(control.inflightBytes(), 4 * MiB);
  for (int i = 0; i < 8; ++i) control.onWritten(100.0 * i);
  ASSERT_TRUE(control.tcpSignalsDue(1000));  // read for BRAID_DEBUG's state line ...
  control.onTcpSignals(TcpSignals{0, 1, 5000, 10}, 1000);
  control.onTcpSignals(TcpSignals{1000, 1, 5000, 10}, 5000);  // ... but losses and queueing change nothing
  EXPECT_EQ(control.state().retransmits, 1000u);
  ASSERT_TRUE(control.onAck(3, 0, 100000).isOk());  // a huge RTT changes nothing either
  EXPECT_DOUBLE_EQ(control.state().rtt_us, 100000 - 200);
  EXPECT_EQ(control.inflightBytes(), 5 * 512 * KiB);
  EXPECT_TRUE(control.mayCommit(512 * KiB));
  EXPECT_EQ(control.chunkBytes(), 512 * KiB);
  EXPECT_EQ(control.windowBytes(), 4 * MiB);
}

TEST(SenderControl, AcknowledgementsMustNameWrittenFrames) {
  SenderControl control(adaptiveConfig());
  control.onCommit(512 * KiB);
  control.onCommit(512 * KiB);
  control.onWritten(10);
  const Status too_many = control.onAck(2, 0, 50);  // only one was written
  EXPECT_EQ(too_many.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.message().find("an acknowledgement of 2 chunk(s) while 1 were written"), std::string::npos);
  EXPECT_FALSE(control.onAck(0, 0, 50).isOk());
  EXPECT_TRUE(control.onAck(1, 0, 50).isOk());
  EXPECT_EQ(control.inflightBytes(), 512 * KiB);
}

TEST(SenderControl, AdaptiveStartsAtNcclsWindowAndGrowsBackOneChunkPerWindow) {
  SenderControl control(adaptiveConfig());
  EXPECT_EQ(control.chunkBytes(), 512 * KiB);
  EXPECT_EQ(control.windowBytes(), 4 * MiB);
  double now = 0;
  roundTrips(control, 2, &now, 100);
  EXPECT_EQ(control.windowBytes(), 4 * MiB);  // at the ceiling
  control.onTcpSignals(TcpSignals{0, 0, 90, 80}, now);
  now += 1000;
  control.onTcpSignals(TcpSignals{1, 0, 90, 80}, now);  // a loss: x0.5
  ASSERT_EQ(control.windowBytes(), 2 * MiB);
  // No delivery rate measured, so no bandwidth-delay product: additive increase, +chunk x acked / window per
  // acknowledgement: 512 KiB x 512 KiB / 2 MiB = 131072.
  roundTrips(control, 1, &now, 100);
  EXPECT_EQ(control.windowBytes(), 2 * MiB + 131072);
  roundTrips(control, 200, &now, 100);
  EXPECT_EQ(control.windowBytes(), 4 * MiB);  // and never past the ceiling
  EXPECT_EQ(control.state().decreases, 1u);
  EXPECT_DOUBLE_EQ(control.state().base_rtt_us, 100);
}

TEST(SenderControl, LossHalvesTheWindowOncePerRoundTrip) {
  SenderControl control(adaptiveConfig());
  double now = 0;
  roundTrips(control, 200, &now, 100);  // window at its 4 MiB ceiling, RTT 100 µs
  ASSERT_EQ(control.windowBytes(), 4 * MiB);
  ASSERT_TRUE(control.tcpSignalsDue(now));
  control.onTcpSignals(TcpSignals{7, 0, 90, 80}, now);  // the first read: a baseline, not a loss
  EXPECT_EQ(control.windowBytes(), 4 * MiB);
  EXPECT_FALSE(control.tcpSignalsDue(now + 999));  // at most one read per millisecond
  now += 1000;
  control.onTcpSignals(TcpSignals{9, 0, 90, 80}, now);  // 2 retransmissions: x0.5
  EXPECT_EQ(control.windowBytes(), 2 * MiB);
  EXPECT_EQ(control.chunkBytes(), 512 * KiB);                 // fabric congestion shrinks the window, not the chunk
  control.onTcpSignals(TcpSignals{12, 0, 90, 80}, now + 50);  // within the same RTT (100 µs): the same event
  EXPECT_EQ(control.windowBytes(), 2 * MiB);
  control.onTcpSignals(TcpSignals{13, 0, 90, 80}, now + 150);  // the next RTT: x0.5 again
  EXPECT_EQ(control.windowBytes(), 1 * MiB);
  EXPECT_EQ(control.state().decreases, 2u);
  EXPECT_EQ(control.state().retransmits, 13u);
}

TEST(SenderControl, DecreasesStopAtTwiceWhatTheConnectionDeliversInABaseRtt) {
  SenderControl control(adaptiveConfig());
  double now = 0;
  roundTrips(control, 4, &now, 1000);                            // base RTT of 512 KiB chunks: 1000 µs
  control.onTcpSignals(TcpSignals{0, 1000000000, 90, 80}, now);  // 1 GB/s delivered: floor 2 x 1e9 x 1 ms = 2 MB
  for (int i = 1; i <= 5; ++i) {
    now += 5000;
    control.onTcpSignals(TcpSignals{static_cast<uint64_t>(i), 500000000, 90, 80}, now);  // a loss every time
  }
  EXPECT_EQ(control.windowBytes(), 2000000u);  // 4 MiB -> 2 MiB -> the 2 MB floor, and no lower
}

TEST(SenderControl, KernelQueueingShrinksTheWindow) {
  SenderControl control(adaptiveConfig());
  double now = 0;
  roundTrips(control, 4, &now, 100);
  const uint64_t before = control.windowBytes();
  control.onTcpSignals(TcpSignals{0, 0, 200, 100}, now);  // 200 < 4 x 100 + 50: no queue
  EXPECT_EQ(control.windowBytes(), before);
  control.onTcpSignals(TcpSignals{0, 0, 460, 100}, now + 2000);  // 460 > 450: a standing queue
  EXPECT_EQ(control.windowBytes(), before / 2);
}

TEST(SenderControl, DelayAboveTargetShrinksTheChunkFirstUnderIncast) {
  SenderControl control(adaptiveConfig());
  double now = 0;
  roundTrips(control, 200, &now, 1000);  // base RTT of 512 KiB chunks: 1000 µs; target max(2000, 1050)
  ASSERT_EQ(control.windowBytes(), 4 * MiB);
  control.onFanIn(3);                  // three senders wait at that receiver: incast
  roundTrips(control, 1, &now, 3000);  // 3000 > 2000
  EXPECT_EQ(control.chunkBytes(), 256 * KiB);
  EXPECT_EQ(control.windowBytes(), 4 * MiB);  // the window stays
  // 256 KiB chunks have no base yet: their first sample is their base, so the next decrease needs a sample above
  // twice it (and one RTT since the last decrease: the EWMA of the samples, 1250 µs).
  roundTrips(control, 1, &now, 1500);
  EXPECT_EQ(control.chunkBytes(), 256 * KiB);
  roundTrips(control, 1, &now, 3100);  // above 2 x 1500
  EXPECT_EQ(control.chunkBytes(), 128 * KiB);
  roundTrips(control, 1, &now, 1500);  // base of 128 KiB chunks: 1500
  roundTrips(control, 1, &now, 3100);
  EXPECT_EQ(control.chunkBytes(), 64 * KiB);
  roundTrips(control, 1, &now, 1500);
  roundTrips(control, 1, &now, 3100);  // at the minimum chunk, and TCP sees no queue: the hosts' delay, W stays
  EXPECT_EQ(control.chunkBytes(), 64 * KiB);
  EXPECT_EQ(control.windowBytes(), 4 * MiB);
  control.onTcpSignals(TcpSignals{0, 0, 300, 100}, now);  // 300 > 2 x 100 + 50: a network queue (not 4 x)
  EXPECT_EQ(control.windowBytes(), 4 * MiB);
  roundTrips(control, 1, &now, 1500);
  roundTrips(control, 1, &now, 3100);  // now the window goes, x0.5 at most
  EXPECT_EQ(control.chunkBytes(), 64 * KiB);
  EXPECT_LT(control.windowBytes(), 4 * MiB);
  EXPECT_GE(control.windowBytes(), 2 * MiB);
}

TEST(SenderControl, DelayAtTheHostsLeavesTheWindow) {
  SenderControl control(adaptiveConfig());
  double now = 0;
  roundTrips(control, 200, &now, 1000);
  control.onTcpSignals(TcpSignals{0, 0, 110, 100}, now);  // TCP's RTT at its minimum: no network queue
  roundTrips(control, 1, &now, 5000);
  EXPECT_EQ(control.windowBytes(), 4 * MiB);
  EXPECT_EQ(control.chunkBytes(), 512 * KiB);
  EXPECT_EQ(control.state().decreases, 0u);
}

TEST(SenderControl, DelayWithoutIncastShrinksTheWindowInProportion) {
  SenderControl control(adaptiveConfig());
  double now = 0;
  roundTrips(control, 200, &now, 1000);
  ASSERT_EQ(control.windowBytes(), 4 * MiB);
  control.onFanIn(1);
  control.onTcpSignals(TcpSignals{0, 0, 300, 100}, now);  // a network queue TCP sees (2 x, not 4 x)
  ASSERT_EQ(control.windowBytes(), 4 * MiB);
  roundTrips(control, 1, &now, 2500);  // target 2000: factor 1 - 0.8 x 500 / 2500 = 0.84
  EXPECT_EQ(control.chunkBytes(), 512 * KiB);
  EXPECT_EQ(control.windowBytes(), static_cast<uint64_t>(4.0 * MiB * 0.84));
  roundTrips(control, 1, &now, 100000);  // far above: at most x0.5
  EXPECT_EQ(control.windowBytes(), static_cast<uint64_t>(4.0 * MiB * 0.84 * 0.5));
}

TEST(SenderControl, WindowNeverGoesBelowOneSmallestChunkAndChunksFollowIt) {
  Config config = adaptiveConfig();
  config.grant_bytes = 64 * KiB;  // the floor is also one grant (below)
  SenderControl control(config);
  double now = 0;
  roundTrips(control, 2, &now, 100);
  for (int i = 0; i < 20; ++i) {
    now += 1000;
    control.onTcpSignals(TcpSignals{static_cast<uint64_t>(i) * 10, 0, 100, 90}, now);
  }
  EXPECT_EQ(control.windowBytes(), 64 * KiB);
  EXPECT_EQ(control.chunkBytes(), 64 * KiB);
  // Recovery: the chunk doubles again once the window holds 8 chunks (4 of the doubled size).
  roundTrips(control, 2000, &now, 100);
  EXPECT_EQ(control.windowBytes(), 4 * MiB);
  EXPECT_EQ(control.chunkBytes(), 512 * KiB);
}

TEST(SenderControl, WindowNeverGoesBelowOneGrant) {
  SenderControl control(adaptiveConfig());  // grant 1 MiB
  double now = 0;
  roundTrips(control, 2, &now, 100);
  // Losses every millisecond: 4 MiB halves to 2 MiB, then 1 MiB, and stays there (an admitted sender can send its
  // whole grant in one window).
  for (int i = 0; i < 20; ++i) {
    now += 1000;
    control.onTcpSignals(TcpSignals{static_cast<uint64_t>(i) * 10, 0, 100, 90}, now);
  }
  EXPECT_EQ(control.windowBytes(), 1 * MiB);
}

TEST(SenderControl, ReportsCountTimeoutsFromTheConnectionsStartAndRestartWhenTaken) {
  SenderControl control(adaptiveConfig());
  double now = 0;
  TcpSignals signals;
  signals.rto_counted = true;
  signals.total_rto = 2;  // two timeouts before the first read (the first acknowledgement came after them)
  signals.total_retrans = 7;
  control.onTcpSignals(signals, now += 1000);
  SenderControl::Report report = control.takeReport();
  EXPECT_EQ(report.timeouts, 2u);
  EXPECT_EQ(report.retransmits, 0u);  // retransmissions are counted between reads only
  report = control.takeReport();
  EXPECT_EQ(report.timeouts, 0u);  // taken: the counts restart
  signals.total_retrans = 12;
  control.onTcpSignals(signals, now += 1000);
  signals.total_rto = 5;
  signals.total_retrans = 13;
  control.onTcpSignals(signals, now += 1000);
  report = control.takeReport();
  EXPECT_EQ(report.timeouts, 3u);     // 5 - 2
  EXPECT_EQ(report.retransmits, 6u);  // 13 - 7
  // The kernel's counter is 16 bits: 65535 -> 1 is two more.
  signals.total_rto = 65535;
  control.onTcpSignals(signals, now += 1000);
  signals.total_rto = 1;
  control.onTcpSignals(signals, now += 1000);
  report = control.takeReport();
  EXPECT_EQ(report.timeouts, 65530u + 2u);
  EXPECT_EQ(control.state().timeouts, 2u + 3u + 65530u + 2u);
}

TEST(SenderControl, WithoutTheKernelsCountEachEntryIntoRtoRecoveryIsOneTimeout) {
  SenderControl control(adaptiveConfig());
  double now = 0;
  TcpSignals signals;  // rto_counted false: a kernel before 6.7
  signals.ca_state = kTcpCaLoss;
  control.onTcpSignals(signals, now += 1000);  // found in recovery at the first read: one
  control.onTcpSignals(signals, now += 1000);  // still the same recovery
  signals.ca_state = 0;
  control.onTcpSignals(signals, now += 1000);
  signals.ca_state = kTcpCaLoss;
  control.onTcpSignals(signals, now += 1000);  // a second one
  EXPECT_EQ(control.takeReport().timeouts, 2u);
  EXPECT_EQ(control.takeReport().timeouts, 0u);
}

// Receives the oldest grant in `pending` in full, then appends the grants that follow to it (FIFO: the data of
// earlier grants arrives first).
void receiveOldest(CreditGranter& granter, std::deque<CreditGranter::Grant>& pending) {
  ASSERT_FALSE(pending.empty());
  const CreditGranter::Grant g = pending.front();
  pending.pop_front();
  ASSERT_TRUE(granter.received(g.sender, g.bytes).isOk());
  std::vector<CreditGranter::Grant> out;
  granter.collect(&out);
  pending.insert(pending.end(), out.begin(), out.end());
}

std::vector<int> sendersOf(const std::deque<CreditGranter::Grant>& grants) {
  std::vector<int> senders;
  for (const CreditGranter::Grant& g : grants) senders.push_back(g.sender);
  return senders;
}

TEST(CreditGranter, StartsOpenAndGrantsEveryRequestInFull) {
  CreditGranter granter(/*floor=*/1, /*grant_bytes=*/1 * MiB, /*senders=*/4);
  EXPECT_TRUE(granter.open());
  EXPECT_EQ(granter.admission(), 4);
  std::vector<CreditGranter::Grant> out;
  granter.request(0, 5 * MiB);
  granter.request(3, 3 * MiB);
  granter.collect(&out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].sender, 0);
  EXPECT_EQ(out[0].bytes, 5 * MiB);
  EXPECT_EQ(out[1].sender, 3);
  EXPECT_EQ(out[1].bytes, 3 * MiB);
  EXPECT_FALSE(granter.takeModeChange());
  // Open grants arriving count toward no round.
  ASSERT_TRUE(granter.received(0, 5 * MiB).isOk());
  EXPECT_TRUE(granter.open());
  EXPECT_EQ(granter.increases(), 0u);
  granter.report(1, 0);  // no timeouts: nothing changes
  EXPECT_TRUE(granter.open());
}

TEST(CreditGranter, TheFirstReportAdmitsHalfTheLiveSendersAndTheNextRoundsReportsHalveAgain) {
  CreditGranter granter(/*floor=*/1, 1 * MiB, /*senders=*/8);
  granter.forget(0);  // the receiver itself: 7 live senders
  EXPECT_EQ(granter.admission(), 7);
  granter.report(3, 2);
  EXPECT_FALSE(granter.open());
  EXPECT_EQ(granter.admission(), 3);  // 7 / 2
  EXPECT_TRUE(granter.takeModeChange());
  EXPECT_FALSE(granter.takeModeChange());
  EXPECT_EQ(granter.decreases(), 1u);
  // The round right after a decrease (3 grants: admission 3, nobody waiting) only notes reports.
  granter.report(5, 1);
  EXPECT_EQ(granter.admission(), 3);
  EXPECT_EQ(granter.decreases(), 1u);
  std::deque<CreditGranter::Grant> pending;
  for (int s = 1; s < 8; ++s) granter.request(s, 1 * MiB);
  std::vector<CreditGranter::Grant> out;
  granter.collect(&out);
  pending.assign(out.begin(), out.end());
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{1, 2, 3}));
  for (int i = 0; i < 3; ++i) receiveOldest(granter, pending);  // the round ends, reported: no growth
  EXPECT_EQ(granter.admission(), 3);
  EXPECT_EQ(granter.increases(), 0u);
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{4, 5, 6}));
  granter.report(4, 1);  // a report in a later round halves: 3 / 2 = 1
  EXPECT_EQ(granter.admission(), 1);
  EXPECT_EQ(granter.decreases(), 2u);
  granter.report(4, 1);  // again the round after a decrease
  EXPECT_EQ(granter.decreases(), 2u);
  // The three granted before drain; sender 7 waits until no sender holds a grant.
  receiveOldest(granter, pending);
  receiveOldest(granter, pending);
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{6}));
  receiveOldest(granter, pending);
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{7}));
  EXPECT_EQ(granter.granted(), 1);
}

TEST(CreditGranter, AdmissionNeverHalvesBelowTheFloor) {
  CreditGranter granter(/*floor=*/3, 1 * MiB, /*senders=*/8);
  granter.report(0, 1);
  EXPECT_EQ(granter.admission(), 4);  // 8 / 2; round of max(4, 0 waiting) grants, after a decrease
  for (int s = 0; s < 8; ++s) granter.request(s, 1 * MiB);
  std::vector<CreditGranter::Grant> out;
  granter.collect(&out);
  std::deque<CreditGranter::Grant> pending(out.begin(), out.end());
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{0, 1, 2, 3}));
  for (int i = 0; i < 3; ++i) receiveOldest(granter, pending);
  granter.report(4, 1);             // noted only
  receiveOldest(granter, pending);  // the round ends: no growth; next round max(4, 4 waiting) = 4 grants
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{4, 5, 6, 7}));
  granter.report(5, 1);
  EXPECT_EQ(granter.admission(), 3);                            // max(3, 4 / 2)
  for (int i = 0; i < 4; ++i) receiveOldest(granter, pending);  // round of max(3, 4 waiting) = 4: no report
  EXPECT_EQ(granter.admission(), 4);                            // one more
  EXPECT_EQ(granter.increases(), 1u);
  granter.report(6, 1);
  EXPECT_EQ(granter.admission(), 3);  // max(3, 4 / 2)
  EXPECT_EQ(granter.decreases(), 3u);
}

TEST(CreditGranter, RoundsWithoutReportsAddOneSenderUntilEveryLiveSenderIsAdmittedAgain) {
  CreditGranter granter(/*floor=*/1, 1 * MiB, /*senders=*/5);
  granter.forget(0);     // senders 1..4 live
  granter.report(1, 1);  // admission 2; its round: max(1, 2, 0 waiting) = 2 grants
  for (int s = 1; s <= 4; ++s) granter.request(s, 2 * MiB);
  std::vector<CreditGranter::Grant> out;
  granter.collect(&out);
  std::deque<CreditGranter::Grant> pending(out.begin(), out.end());
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{1, 2}));
  receiveOldest(granter, pending);  // round 1 of 2; sender 3 takes the credit, 1 queues again behind 4
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{2, 3}));
  receiveOldest(granter, pending);  // round done, no report: admission 3; next round max(3, 4 waiting) = 4
  EXPECT_EQ(granter.admission(), 3);
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{3, 4, 1}));
  granter.report(3, 1);  // admission 3 / 2 = 1; round of 4 after a decrease
  EXPECT_EQ(granter.admission(), 1);
  receiveOldest(granter, pending);  // 3 holders drain to none before sender 2 (waiting since) is granted
  receiveOldest(granter, pending);
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{1}));
  receiveOldest(granter, pending);
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{2}));
  receiveOldest(granter, pending);  // 4 of 4, no report in the round: admission 2; round of max(2, 2 waiting)
  EXPECT_EQ(granter.admission(), 2);
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{3, 4}));  // their second MiB
  receiveOldest(granter, pending);
  receiveOldest(granter, pending);  // admission 3; nothing wanted any more
  EXPECT_EQ(granter.admission(), 3);
  EXPECT_TRUE(pending.empty());
  EXPECT_FALSE(granter.open());
  // Sender 1 wants 3 MiB more: the round begun with nothing waiting (3 grants) is all its own, then admission 4 =
  // every live sender: open again, and the rest of what is wanted is granted in full.
  granter.request(1, 3 * MiB);
  out.clear();
  granter.collect(&out);
  pending.assign(out.begin(), out.end());
  EXPECT_EQ(sendersOf(pending), (std::vector<int>{1}));
  receiveOldest(granter, pending);
  receiveOldest(granter, pending);
  EXPECT_FALSE(granter.open());
  (void)granter.takeModeChange();
  receiveOldest(granter, pending);
  EXPECT_TRUE(granter.open());
  EXPECT_TRUE(granter.takeModeChange());
  EXPECT_EQ(granter.admission(), 4);
  EXPECT_EQ(granter.decreases(), 2u);
  EXPECT_EQ(granter.increases(), 4u);
  granter.request(2, 5 * MiB);
  out.clear();
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].bytes, 5 * MiB);
}

TEST(CreditGranter, GrantsOfAQuarterOrLessCompleteWhenTheyHaveArrived) {
  CreditGranter granter(/*floor=*/1, 1 * MiB, /*senders=*/2);
  granter.report(0, 1);  // admission 1 of 2; a round of one grant
  granter.request(1, 100 * KiB);
  std::vector<CreditGranter::Grant> out;
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(granter.granted(), 0);  // 100 KiB never holds the credit
  ASSERT_TRUE(granter.received(1, 60 * KiB).isOk());
  EXPECT_FALSE(granter.open());
  ASSERT_TRUE(granter.received(1, 40 * KiB).isOk());  // all in: the round ends, admission 2 = both: open
  EXPECT_TRUE(granter.open());
}

TEST(CreditGranter, AReportThatWouldAdmitEverySenderAnywayChangesNothing) {
  CreditGranter alone(/*floor=*/1, 1 * MiB, /*senders=*/2);
  alone.forget(0);
  alone.report(1, 3);  // max(1, 1 / 2) = 1 = every live sender
  EXPECT_TRUE(alone.open());
  EXPECT_EQ(alone.decreases(), 0u);
  CreditGranter high_floor(/*floor=*/4, 1 * MiB, /*senders=*/4);
  high_floor.report(0, 1);  // max(4, 2) = 4
  EXPECT_TRUE(high_floor.open());
  CreditGranter off(/*floor=*/0, 1 * MiB, /*senders=*/8);
  off.report(0, 1);  // floor 0: no admission control at all
  EXPECT_TRUE(off.open());
}

TEST(CreditGranter, SendersComeAndGoAndAdmissionOpensWhenItCoversTheRest) {
  CreditGranter granter(/*floor=*/1, 1 * MiB, /*senders=*/3);
  granter.report(0, 1);  // admission 1 of 3
  EXPECT_EQ(granter.addSender(), 3);
  EXPECT_EQ(granter.admission(), 1);
  granter.request(3, 1 * MiB);  // the new sender is gated like the rest
  granter.request(0, 1 * MiB);
  std::vector<CreditGranter::Grant> out;
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sender, 3);
  granter.request(1, 1 * MiB);
  granter.forget(1);
  granter.forget(2);  // 2 live (0 and 3), 1 admitted: still gated
  EXPECT_FALSE(granter.open());
  granter.report(1, 1);  // a forgotten sender's report counts for nothing
  EXPECT_EQ(granter.decreases(), 1u);
  granter.request(1, 1 * MiB);  // nor its requests
  granter.forget(3);            // 1 live, 1 admitted: open, and sender 0's request is granted in full
  EXPECT_TRUE(granter.open());
  out.clear();
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sender, 0);
  EXPECT_EQ(out[0].bytes, 1 * MiB);
}

TEST(CreditGranter, AReleaseCountsAsArrivedAndCompletesTheGrant) {
  CreditGranter granter(/*floor=*/1, 1 * MiB, /*senders=*/3);
  granter.report(0, 1);  // admission 1 of 3; round of one grant
  granter.report(0, 1);  // noted: no growth at its end
  granter.request(1, 1 * MiB);
  granter.request(2, 1 * MiB);
  std::vector<CreditGranter::Grant> out;
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(granter.received(1, 300 * KiB).isOk());  // data
  // The sender's messages went while admission was open: it gives back the 724 KiB it will not use, and the
  // credit passes on to sender 2.
  ASSERT_FALSE(granter.received(1, 725 * KiB).isOk());  // more than outstanding: an error, nothing changes
  ASSERT_TRUE(granter.received(1, 724 * KiB).isOk());
  out.clear();
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sender, 2);
  EXPECT_EQ(granter.admission(), 1);
  EXPECT_EQ(granter.waiting(), 1);
}

TEST(CreditGranter, AtMostKSendersHoldGrantsAndTheyRotateInRequestOrder) {
  CreditGranter granter(/*floor=*/1, /*grant_bytes=*/1 * MiB, /*senders=*/4);
  granter.forget(0);     // senders 1..3
  granter.report(1, 1);  // admission 1; reports before every completion keep it there
  std::vector<CreditGranter::Grant> out;
  granter.request(2, 3 * MiB);
  granter.request(1, 2 * MiB);
  granter.request(3, 1 * MiB);
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);  // one credit: sender 2 (first to ask), 1 MiB
  EXPECT_EQ(out[0].sender, 2);
  EXPECT_EQ(out[0].bytes, 1 * MiB);
  EXPECT_EQ(granter.waiting(), 3);
  EXPECT_EQ(granter.granted(), 1);
  // Half of the grant arrives: others wait, so no renewal.
  ASSERT_TRUE(granter.received(2, 512 * KiB).isOk());
  out.clear();
  granter.collect(&out);
  EXPECT_TRUE(out.empty());
  granter.report(2, 1);
  // The rest: the credit goes to sender 1; sender 2 (2 MiB still wanted) goes to the back.
  ASSERT_TRUE(granter.received(2, 512 * KiB).isOk());
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sender, 1);
  std::vector<int> order = {1};
  // Drain everything, one grant at a time: the order rotates 1, 3, 2, 1, 2.
  for (int step = 0; step < 10 && !out.empty(); ++step) {
    const CreditGranter::Grant g = out.back();
    out.clear();
    granter.report(g.sender, 1);
    EXPECT_EQ(granter.admission(), 1);
    ASSERT_TRUE(granter.received(g.sender, g.bytes).isOk());
    granter.collect(&out);
    ASSERT_LE(out.size(), 1u);
    if (!out.empty()) order.push_back(out[0].sender);
  }
  EXPECT_EQ(order, (std::vector<int>{1, 3, 2, 1, 2}));
  EXPECT_EQ(granter.waiting(), 0);
  EXPECT_EQ(granter.granted(), 0);
}

TEST(CreditGranter, ALoneSenderIsRenewedBeforeItsGrantRunsDry) {
  CreditGranter granter(1, 1 * MiB, 2);
  granter.report(1, 1);  // admission 1 of 2
  granter.report(1, 1);  // noted in the round after the decrease: no growth at its end
  std::vector<CreditGranter::Grant> out;
  granter.request(0, 3 * MiB);
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  out.clear();
  ASSERT_TRUE(granter.received(0, 512 * KiB).isOk());  // 512 KiB outstanding: more than a quarter
  granter.collect(&out);
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(granter.received(0, 256 * KiB).isOk());  // 256 KiB outstanding: the credit passes on, to itself
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sender, 0);
  EXPECT_EQ(out[0].bytes, 1 * MiB);
  EXPECT_EQ(granter.granted(), 1);  // still one holder
}

TEST(CreditGranter, TheNextSenderIsGrantedWhileTheLastQuarterDrains) {
  CreditGranter granter(1, 1 * MiB, 3);
  granter.report(2, 1);  // admission 1 of 3
  granter.report(2, 1);
  std::vector<CreditGranter::Grant> out;
  granter.request(0, 1 * MiB);
  granter.request(1, 1 * MiB);
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  out.clear();
  ASSERT_TRUE(granter.received(0, 700 * KiB).isOk());  // 324 KiB still to come: sender 0 keeps the credit
  granter.collect(&out);
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(granter.received(0, 100 * KiB).isOk());  // 224 KiB to come: sender 1 gets it
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sender, 1);
  EXPECT_EQ(granter.waiting(), 2);  // sender 0 drains, sender 1 holds
  EXPECT_TRUE(granter.received(0, 224 * KiB).isOk());
  EXPECT_EQ(granter.waiting(), 1);
}

TEST(CreditGranter, MoreThanGrantedIsAnErrorAndAForgottenSenderFreesItsCredit) {
  CreditGranter granter(1, 1 * MiB, 3);
  granter.report(2, 1);  // admission 1 of 3; after forget(0) below, 1 of 2: still gated
  std::vector<CreditGranter::Grant> out;
  granter.request(0, 1 * MiB);
  granter.request(1, 1 * MiB);
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  const Status over = granter.received(0, 2 * MiB);
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find("sent 2 MiB of credited data with 1 MiB granted"), std::string::npos);
  EXPECT_FALSE(granter.received(1, 1).isOk());  // nothing granted to sender 1 yet
  out.clear();
  granter.forget(0);
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sender, 1);
}

TEST(CreditGranter, CloseGatesEvenEveryLiveSenderAndGrowsToOpen) {
  CreditGranter granter(/*floor=*/1, 1 * MiB, /*senders=*/2);
  granter.forget(0);  // one live sender (two ranks)
  granter.close(1);   // admission 1 = every live sender, gated nonetheless; a round of max(1, 1, 0) = 1 grant
  EXPECT_FALSE(granter.open());
  EXPECT_TRUE(granter.takeModeChange());
  granter.request(1, 3 * MiB);
  std::vector<CreditGranter::Grant> out;
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].bytes, 1 * MiB);
  ASSERT_TRUE(granter.received(1, 1 * MiB).isOk());  // the round ends unreported: admission 2 >= 1 live: open
  EXPECT_TRUE(granter.open());
  out.clear();
  granter.collect(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].bytes, 2 * MiB);  // the rest, in full
  CreditGranter off(/*floor=*/0, 1 * MiB, 2);
  off.close(1);
  EXPECT_TRUE(off.open());
}

TEST(CreditGranter, FloorZeroGrantsEveryRequestAtOnce) {
  CreditGranter granter(0, 1 * MiB, 3);
  std::vector<CreditGranter::Grant> out;
  granter.request(0, 5 * MiB);
  granter.request(1, 3 * MiB);
  granter.collect(&out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].bytes, 5 * MiB);
  EXPECT_EQ(out[1].bytes, 3 * MiB);
}

TEST(PeerScheduler, BoundsActivePeersAndHandsSlotsOnInOrder) {
  PeerScheduler scheduler(2, 5);
  scheduler.want(3);
  scheduler.want(1);
  scheduler.want(4);
  scheduler.want(2);
  scheduler.want(4);  // already waiting: no second place
  EXPECT_TRUE(scheduler.active(3));
  EXPECT_TRUE(scheduler.active(1));
  EXPECT_FALSE(scheduler.active(4));
  EXPECT_EQ(scheduler.activeCount(), 2);
  EXPECT_EQ(scheduler.release(1), 4);
  EXPECT_TRUE(scheduler.active(4));
  EXPECT_EQ(scheduler.release(0), -1);  // not active: nothing happens
  EXPECT_EQ(scheduler.release(3), 2);
  EXPECT_EQ(scheduler.release(4), -1);
  EXPECT_EQ(scheduler.activeCount(), 1);
  PeerScheduler all(0, 5);
  EXPECT_TRUE(all.active(4));
  EXPECT_EQ(all.release(4), -1);
}

}  // namespace
}  // namespace braid::congestion
