// The congestion model (include/braid/congestion.h) on cases whose times follow by hand from its rules: trains of T
// bytes cross each link store-and-forward in T/B plus the link latency a; a switch egress serves its FIFO; PFC pauses
// an ingress port at Xoff; receiver credits keep rx_credit_chunks granted chunks in flight. Units: bytes, us, GB/s =
// 1e3 bytes/us.
#include "braid/congestion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace braid::congestion {
namespace {

constexpr double kB = 50e3;        // 50 GB/s in bytes/us
constexpr double kA = 0.6;         // latency per hop, us
constexpr uint64_t kT = 64 << 10;  // train
constexpr uint64_t kM = 1 << 20;   // flow size
constexpr double kTol = 1e-6;

// `ranks` NICs under one leaf, one GPU per node: every path is NIC -> leaf -> NIC (2 hops).
FabricSpec oneLeaf(int ranks) {
  FabricSpec f;
  f.kind = FabricKind::kLeafSpine;
  f.ranks = ranks;
  f.gpus_per_node = 1;
  f.hosts_per_leaf = ranks;
  f.link_gbps = 50;
  f.link_latency_us = kA;
  return f;
}

SwitchSpec noPfcNoEcn() {
  SwitchSpec s;
  s.pfc = false;
  s.ecn_kmin_bytes = s.ecn_kmax_bytes = uint64_t{1} << 40;
  return s;
}

Workload trains(int peers_in_flight = 8) {
  Workload w;
  w.train_bytes = kT;
  w.peers_in_flight = peers_in_flight;
  return w;
}

std::vector<double> sortedFct(const Report& r) {
  std::vector<double> v = r.fct_us;
  std::sort(v.begin(), v.end());
  return v;
}

TEST(Congestion, OneFlowAloneIsBytesOverBandwidthPlusLatency) {
  // 16 trains; the NIC sends train k over [kT/B, (k+1)T/B], the leaf forwards it right behind, so the last train is
  // delivered at M/B + T/B (one extra store-and-forward hop) + 2a.
  auto r = simulateFlows(oneLeaf(2), noPfcNoEcn(), Policy::fixed512k(), trains(), {{0, 1, kM}});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const double expect = kM / kB + kT / kB + 2 * kA;
  EXPECT_NEAR(r->time_us, expect, kTol);
  ASSERT_EQ(r->fct_us.size(), 1u);
  EXPECT_NEAR(r->fct_us[0], expect, kTol);
  EXPECT_EQ(r->trains, 16);
  EXPECT_EQ(r->pause_frames, 0);
  EXPECT_EQ(r->ecn_marks, 0);
  EXPECT_NEAR(r->nic_gbps, kM / expect / 1e3, 1e-9);
}

TEST(Congestion, TwoFlowsIntoOnePortShareItFairly) {
  // 0 -> 2 and 1 -> 2: both NICs inject at B, the leaf's port to 2 drains at B, alternating the two flows' trains
  // (FIFO). 32 trains leave it back to back from T/B + a: the first flow's last at 32 T/B + a, the other's at
  // 33 T/B + a, each delivered a later: both about 2M/B, the fair share.
  auto r = simulateFlows(oneLeaf(3), noPfcNoEcn(), Policy::fixed512k(), trains(), {{0, 2, kM}, {1, 2, kM}});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const std::vector<double> fct = sortedFct(*r);
  ASSERT_EQ(fct.size(), 2u);
  EXPECT_NEAR(fct[0], 2 * kM / kB + 2 * kA, kTol);
  EXPECT_NEAR(fct[1], 2 * kM / kB + kT / kB + 2 * kA, kTol);
  // At (k+1)T/B + a two trains arrive and the port has sent k and is sending one: k+1 wait. The last pair
  // (k = 15) leaves 16 waiting, 17 in the switch.
  EXPECT_EQ(r->max_queue_bytes, 16 * kT);
  EXPECT_EQ(r->max_buffer_bytes, 17 * kT);
}

TEST(Congestion, QueueBeyondXoffPausesTheSenders) {
  // The 2:1 incast above with PFC: Xoff 4 trains, Xon 2 per ingress port. A port pauses its NIC when it holds 4
  // trains; the pause takes a to arrive, during which the NIC finishes at most the train it is sending and starts
  // one more (T/B > a), so a port holds at most 6 trains and the switch 12, against 17 without PFC. The port to 2
  // never idles (at Xon the switch still holds 4 trains, 4 T/B of work, and the next ones arrive 2a + T/B after
  // the resume is sent), so the flows finish when they would without PFC.
  SwitchSpec pfc = noPfcNoEcn();
  pfc.pfc = true;
  pfc.pfc_xoff_bytes = 4 * kT;
  pfc.pfc_xon_bytes = 2 * kT;
  auto off = simulateFlows(oneLeaf(3), noPfcNoEcn(), Policy::fixed512k(), trains(), {{0, 2, kM}, {1, 2, kM}});
  auto on = simulateFlows(oneLeaf(3), pfc, Policy::fixed512k(), trains(), {{0, 2, kM}, {1, 2, kM}});
  ASSERT_TRUE(off.isOk() && on.isOk());
  EXPECT_EQ(off->pause_frames, 0);
  EXPECT_EQ(off->max_buffer_bytes, 17 * kT);
  EXPECT_GE(on->pause_frames, 2);  // both ingress ports
  EXPECT_GT(on->paused_us, 0);
  EXPECT_LE(on->max_buffer_bytes, 12 * kT);
  EXPECT_NEAR(on->time_us, off->time_us, kTol);
}

TEST(Congestion, ReceiverCreditsLetOneSenderPushAtATime) {
  // 4 senders -> rank 4, 2 chunks of C = 512 KiB each, rx_credit_chunks = 1, windows never binding. L = 2a is the
  // path latency. The four requests reach the receiver at L; the first grant reaches flow 0 at 2L. A chunk takes
  // C/B to send, lands T/B + L after its last train left, and its credit reaches the next requester L later: one
  // chunk every P = C/B + T/B + 2L, in the order 0, 1, 2, 3 (queued at L), then 0, 1, 2, 3 again (each asked for
  // its second chunk as its first went out, behind the others). Flow k's second chunk is the (4+k)th: it starts at
  // 2L + (4+k)P and lands C/B + T/B + L later.
  constexpr uint64_t kC = 512 << 10;
  Policy credits = Policy::adaptive();
  credits.ecn_window = false;
  credits.rtt_target_us = 0;
  credits.rx_credit_chunks = 1;
  credits.chunk_bytes = credits.min_chunk_bytes = kC;
  credits.initial_window_bytes = credits.max_window_bytes = uint64_t{64} << 20;
  const std::vector<FlowSpec> incast = {{0, 4, kM}, {1, 4, kM}, {2, 4, kM}, {3, 4, kM}};
  auto r = simulateFlows(oneLeaf(5), noPfcNoEcn(), credits, trains(), incast);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const double L = 2 * kA, P = kC / kB + kT / kB + 2 * L;
  ASSERT_EQ(r->fct_us.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_NEAR(r->fct_us[k], 2 * L + (4 + k) * P + kC / kB + kT / kB + L, kTol) << k;
  }
  // One sender at a time: a chunk's first train reaches the leaf after the previous chunk's last has left, so a
  // train never waits behind another (the queue holds at most the train just enqueued).
  EXPECT_LE(r->max_queue_bytes, kT);
  // Without credits the four share the port, round-robin by train: the first to finish has its last train 61st of
  // the 64, so every flow takes about 4M/B.
  Policy open = credits;
  open.rx_credit_chunks = 0;
  auto shared = simulateFlows(oneLeaf(5), noPfcNoEcn(), open, trains(), incast);
  ASSERT_TRUE(shared.isOk());
  const std::vector<double> fct = sortedFct(*shared);
  EXPECT_NEAR(fct.front(), 62 * kT / kB + 2 * kA, kTol);
  EXPECT_NEAR(fct.back(), 65 * kT / kB + 2 * kA, kTol);
  EXPECT_GT(shared->max_queue_bytes, 8 * kT);
}

TEST(Congestion, RailFabricSendsThroughThePeersRail) {
  // 2 nodes x 2 GPUs on rails: rank 0 sends to ranks 2 (rail 0) and 3 (rail 1) at once. PXN: 0 -> 3 enters the
  // fabric at NIC 1 of node 0, so the two flows use different NICs and rail switches and each takes M/B + T/B + 2a.
  // On a leaf-spine fabric both leave through rank 0's NIC and share it: 2M/B.
  FabricSpec rail;
  rail.kind = FabricKind::kRail;
  rail.ranks = 4;
  rail.gpus_per_node = 2;
  rail.link_latency_us = kA;
  auto r = simulateFlows(rail, noPfcNoEcn(), Policy::fixed512k(), trains(), {{0, 2, kM}, {0, 3, kM}});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_NEAR(r->time_us, kM / kB + kT / kB + 2 * kA, kTol);
  FabricSpec leaf = oneLeaf(4);
  leaf.gpus_per_node = 2;
  auto l = simulateFlows(leaf, noPfcNoEcn(), Policy::fixed512k(), trains(), {{0, 2, kM}, {0, 3, kM}});
  ASSERT_TRUE(l.isOk());
  EXPECT_GT(l->time_us, 2 * kM / kB);
}

TEST(Congestion, FixedWindowLimitsUnacknowledgedChunks) {
  // One flow, window of 1 chunk of 128 KiB (2 trains): each chunk waits for the previous one's acknowledgement,
  // which returns 2a after its last train lands. Chunk j's first train leaves at j * (2T/B + T/B + 2a + 2a):
  // sending 2 trains (2T/B), the last one's extra hop (T/B), delivery latency (2a) and the acknowledgement (2a).
  // 8 chunks: the last lands 7 periods + 3T/B + 2a after the start.
  Policy one = Policy::fixed128k();
  one.window_chunks = 1;
  auto r = simulateFlows(oneLeaf(2), noPfcNoEcn(), one, trains(), {{0, 1, kM}});
  ASSERT_TRUE(r.isOk());
  const double period = 3 * kT / kB + 4 * kA;
  EXPECT_NEAR(r->time_us, 7 * period + 3 * kT / kB + 2 * kA, kTol);
}

TEST(Congestion, EcnMarksShrinkTheAdaptiveWindow) {
  // 8:1 incast with a small ECN threshold: the fixed window keeps 8 x 4 MiB in flight into one port, the
  // ECN-driven window keeps the queue near the marking threshold.
  SwitchSpec ecn = noPfcNoEcn();
  ecn.ecn_kmin_bytes = 128 << 10;
  ecn.ecn_kmax_bytes = 512 << 10;
  std::vector<FlowSpec> incast;
  for (int s = 0; s < 8; ++s) incast.push_back({s, 8, 8 * kM});
  Policy dctcp = Policy::adaptive();
  dctcp.rx_credit_chunks = 0;
  dctcp.rtt_target_us = 0;
  auto fixed = simulateFlows(oneLeaf(9), ecn, Policy::fixed512k(), trains(), incast);
  auto adaptive = simulateFlows(oneLeaf(9), ecn, dctcp, trains(), incast);
  ASSERT_TRUE(fixed.isOk() && adaptive.isOk());
  EXPECT_GT(adaptive->ecn_marks, 0);
  EXPECT_LT(adaptive->max_queue_bytes, fixed->max_queue_bytes / 2);
  // The port stays busy either way: the same bytes in about the same time.
  EXPECT_NEAR(adaptive->time_us, fixed->time_us, 0.1 * fixed->time_us);
}

TEST(Congestion, AllToAllCountsFabricFlowsAndBusbw) {
  // 4 nodes x 2 GPUs on one leaf: 8 x 6 pairs cross nodes. The busbw is nccl-tests' (size 8M, factor 7/8).
  FabricSpec f = oneLeaf(8);
  f.gpus_per_node = 2;
  Workload w = trains();
  w.bytes_per_peer = kM;
  auto r = simulateAllToAll(f, SwitchSpec{}, Policy::fixed512k(), w);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->flows, 48);
  EXPECT_NEAR(r->busbw_gbps, 8.0 * kM / r->time_us / 1e3 * 7 / 8, 1e-9);
  // Each NIC sends 6 M; its port is the bottleneck at best.
  EXPECT_GE(r->time_us, 6 * kM / kB);
}

TEST(Congestion, BadSpecsAreErrors) {
  FabricSpec one_node = oneLeaf(8);
  one_node.gpus_per_node = 8;
  EXPECT_FALSE(simulateAllToAll(one_node, SwitchSpec{}, Policy::fixed512k(), Workload{}).isOk());
  FabricSpec uneven = oneLeaf(6);
  uneven.gpus_per_node = 4;
  EXPECT_FALSE(simulateAllToAll(uneven, SwitchSpec{}, Policy::fixed512k(), Workload{}).isOk());
  SwitchSpec bad_pfc;
  bad_pfc.pfc_xon_bytes = bad_pfc.pfc_xoff_bytes + 1;
  EXPECT_FALSE(simulateAllToAll(oneLeaf(4), bad_pfc, Policy::fixed512k(), Workload{}).isOk());
  Policy zero = Policy::fixed512k();
  zero.window_chunks = 0;
  EXPECT_FALSE(simulateAllToAll(oneLeaf(4), SwitchSpec{}, zero, Workload{}).isOk());
  auto same_node = simulateFlows(oneLeaf(4), SwitchSpec{}, Policy::fixed512k(), Workload{}, {{0, 0, kM}});
  ASSERT_FALSE(same_node.isOk());
  EXPECT_NE(same_node.status().message().find("one node"), std::string::npos);
}

}  // namespace
}  // namespace braid::congestion
