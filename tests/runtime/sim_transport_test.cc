// SimTransport driven directly (requests posted by hand): every expected time is derived in the comment above
// it from the cost order of runtime/transport/sim/sim_transport.cc (credit, o, NIC gaps, data phase at the
// fair share, head-to-tail latency, receiver o). Units: bytes, us, GB/s (1 GB/s = 1e3 bytes/us).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "braid/simulate.h"
#include "support/small_topologies.h"

namespace braid {
namespace {

using testing::lineTopology;
using testing::starTopology;

constexpr double kTol = 1e-9;

// Two nodes, one GPU and one NIC each: gpu0 -pcie- nic0 -net- switch -net- nic1 -pcie- gpu1.
Topology twoNodeTopology(double pcie_b, double pcie_a, double net_b, double net_a) {
  Topology t;
  t.name = "two-node";
  const int n0 = t.addNode("n0");
  const int n1 = t.addNode("n1");
  const int g0 = t.addVertex(VertexKind::kGpu, n0);
  const int g1 = t.addVertex(VertexKind::kGpu, n1);
  const int nic0 = t.addVertex(VertexKind::kNic, n0, "nic0");
  const int nic1 = t.addVertex(VertexKind::kNic, n1, "nic1");
  const int sw = t.addVertex(VertexKind::kNetSwitch, -1, "switch");
  t.addDuplexLink(g0, nic0, LinkKind::kPcie, pcie_b, pcie_a);
  t.addDuplexLink(g1, nic1, LinkKind::kPcie, pcie_b, pcie_a);
  t.addDuplexLink(nic0, sw, LinkKind::kNet, net_b, net_a);
  t.addDuplexLink(nic1, sw, LinkKind::kNet, net_b, net_a);
  return t;
}

SendRequest send(int rank, int peer, uint64_t bytes, int channel = 0, Protocol protocol = Protocol::kSimple) {
  SendRequest r;
  r.rank = rank;
  r.peer = peer;
  r.channel = channel;
  r.src = BufferRef{BufferKind::kInput, 0, bytes};
  r.protocol = protocol;
  return r;
}

RecvRequest recv(int rank, int peer, uint64_t bytes, int channel = 0, Protocol protocol = Protocol::kSimple) {
  RecvRequest r;
  r.rank = rank;
  r.peer = peer;
  r.channel = channel;
  r.dst = BufferRef{BufferKind::kOutput, 0, bytes};
  r.protocol = protocol;
  return r;
}

LocalRequest local(int rank, uint64_t bytes, bool fused = false) {
  LocalRequest r;
  r.rank = rank;
  r.src = BufferRef{BufferKind::kInput, 0, bytes};
  r.dst = BufferRef{BufferKind::kOutput, 0, bytes};
  r.fused = fused;
  return r;
}

RequestId post(Result<RequestId> r) {
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  return r.isOk() ? r.value() : 0;
}

// Blocking polls until `count` completions in total were seen; completion times by id.
void drain(SimTransport& t, std::map<RequestId, double>* times, size_t count) {
  while (times->size() < count) {
    std::vector<Completion> done;
    const Status s = t.poll(&done, true);
    ASSERT_TRUE(s.isOk()) << s.toString();
    ASSERT_FALSE(done.empty());
    for (const Completion& c : done) {
      EXPECT_EQ(times->count(c.id), 0u) << "request " << c.id << " completed twice";
      (*times)[c.id] = c.time_us;
    }
  }
}

// `count` messages of `bytes` from rank 0 to rank 1 (message k on channel k with `own_channels`, else all on channel
// 0), the receives posted first, run until all completed: the requests in posting order and their completion times.
struct Messages {
  std::vector<RequestId> sends, recvs;
  std::map<RequestId, double> times;
};
Messages runMessages(SimTransport& t, int count, uint64_t bytes, bool own_channels = false) {
  Messages out;
  for (int k = 0; k < count; ++k) out.recvs.push_back(post(t.postRecv(recv(1, 0, bytes, own_channels ? k : 0))));
  for (int k = 0; k < count; ++k) out.sends.push_back(post(t.postSend(send(0, 1, bytes, own_channels ? k : 0))));
  drain(t, &out.times, 2 * static_cast<size_t>(count));
  return out;
}

TEST(SimTransportTest, OneMessageIsAlphaPlusBytesOverBandwidth) {
  // Ideal model, one link of B = 10 GB/s (1e4 bytes/us), a = 2 us, M = 1e6 bytes:
  // the send ends with its data phase at M/B = 100 us; the receive at M/B + a = 102 us.
  const Topology topo = lineTopology(2, 10, 2);
  SimTransport t(topo, SimModel::ideal());
  const RequestId r = post(t.postRecv(recv(1, 0, 1000000)));
  const RequestId s = post(t.postSend(send(0, 1, 1000000)));
  std::map<RequestId, double> times;
  drain(t, &times, 2);
  EXPECT_NEAR(times[s], 100.0, kTol);
  EXPECT_NEAR(times[r], 102.0, kTol);
  EXPECT_NEAR(t.nowUs(), 102.0, kTol);
  EXPECT_EQ(t.stats().messages, 1);
}

TEST(SimTransportTest, CostsAddUpInDocumentedOrder) {
  // gpu0 -pcie(20 GB/s, 0.5 us)- nic0 -net(12.5 GB/s, 1.3 us)- switch -net- nic1 -pcie- gpu1.
  // Model: efficiency Simple pcie 0.9, net 0.8 -> capacities 18 and 10 GB/s, so one flow moves at 10 GB/s
  // (1e4 bytes/us); hop latency Simple pcie 0.25, net 0.75; o = 0.2; g = 0.05; M = 1e6 bytes.
  //   sender o                      0.2
  //   g at nic0, then at nic1       0.1    -> data starts at 0.3
  //   data M / 1e4                  100    -> the send completes at 100.3
  //   L = 2(0.5+0.25) + 2(1.3+0.75) 5.6
  //   receiver o                    0.2    -> the receive completes at 106.1
  const Topology topo = twoNodeTopology(20, 0.5, 12.5, 1.3);
  SimModel m = SimModel::ideal();
  const int simple = static_cast<int>(Protocol::kSimple);
  m.efficiency[simple][static_cast<int>(LinkKind::kPcie)] = 0.9;
  m.efficiency[simple][static_cast<int>(LinkKind::kNet)] = 0.8;
  m.hop_latency_us[simple][static_cast<int>(LinkKind::kPcie)] = 0.25;
  m.hop_latency_us[simple][static_cast<int>(LinkKind::kNet)] = 0.75;
  m.message_overhead_us = 0.2;
  m.nic_gap_us = 0.05;
  SimTransport t(topo, m);
  const RequestId r = post(t.postRecv(recv(1, 0, 1000000)));
  const RequestId s = post(t.postSend(send(0, 1, 1000000)));
  std::map<RequestId, double> times;
  drain(t, &times, 2);
  EXPECT_NEAR(times[s], 100.3, 1e-9);
  EXPECT_NEAR(times[r], 106.1, 1e-9);
}

TEST(SimTransportTest, NetworkStepsOfOneConnectionWaitTheHandshake) {
  // Ideal model plus net_step_us = 5 on gpu0 -pcie(20)- nic0 -net(10)- switch -net- nic1 -pcie- gpu1 (alpha 0):
  // one flow moves at 10 GB/s (1e4 bytes/us). Three messages of M = 1e5 bytes on one connection: data phases
  // [0, 10), [15, 25), [30, 40); each send completes at its data end, each receive then too (L = 0).
  const Topology topo = twoNodeTopology(20, 0, 10, 0);
  SimModel m = SimModel::ideal();
  m.net_step_us = 5;
  SimTransport t(topo, m);
  Messages run = runMessages(t, 3, 100000);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(run.times[run.sends[i]], 10.0 + 15.0 * i, kTol) << i;
    EXPECT_NEAR(run.times[run.recvs[i]], 10.0 + 15.0 * i, kTol) << i;
  }
}

TEST(SimTransportTest, NetworkStepGapLeavesTheLinkToOthersAndSkipsNvlink) {
  // While connection A waits its 5 us handshake, connection B (same links) runs alone at the full 1e4 bytes/us.
  // A: messages of 1e5 and 1e5 bytes; B: one message of 1.5e5 bytes, all posted at 0.
  //   [0, 20): A1 and B share -> A1 done at 20 (1e5 moved), B has 5e4 left.
  //   [20, 25): A waits; B alone moves its 5e4 -> done at 25.
  //   A2 starts at 25, alone: done at 35.
  // On a line topology (NVLink, no NIC) the same two messages of A follow each other without a gap: 10 and 20 us.
  const Topology net = twoNodeTopology(20, 0, 10, 0);
  SimModel m = SimModel::ideal();
  m.net_step_us = 5;
  {
    SimTransport t(net, m);
    post(t.postRecv(recv(1, 0, 100000, 0)));
    post(t.postRecv(recv(1, 0, 100000, 0)));
    post(t.postRecv(recv(1, 0, 150000, 1)));
    const RequestId a1 = post(t.postSend(send(0, 1, 100000, 0)));
    const RequestId a2 = post(t.postSend(send(0, 1, 100000, 0)));
    const RequestId b = post(t.postSend(send(0, 1, 150000, 1)));
    std::map<RequestId, double> times;
    drain(t, &times, 6);
    EXPECT_NEAR(times[a1], 20.0, kTol);
    EXPECT_NEAR(times[b], 25.0, kTol);
    EXPECT_NEAR(times[a2], 35.0, kTol);
  }
  {
    const Topology line = lineTopology(2, 10, 0);
    SimTransport t(line, m);
    post(t.postRecv(recv(1, 0, 100000)));
    post(t.postRecv(recv(1, 0, 100000)));
    const RequestId a1 = post(t.postSend(send(0, 1, 100000)));
    const RequestId a2 = post(t.postSend(send(0, 1, 100000)));
    std::map<RequestId, double> times;
    drain(t, &times, 4);
    EXPECT_NEAR(times[a1], 10.0, kTol);
    EXPECT_NEAR(times[a2], 20.0, kTol);
  }
}

TEST(SimTransportTest, ReceivePostedLateCompletesWhenPosted) {
  // Delivered at M/B + a = 102 us; the receive is posted at 150 us (after a local op of 150 us) and completes
  // then: max(posted, delivery).
  const Topology topo = lineTopology(2, 10, 2);
  SimModel m = SimModel::ideal();
  m.local_gbps = 1;  // 1e3 bytes/us: 150000 bytes take 150 us
  SimTransport t(topo, m);
  const RequestId s = post(t.postSend(send(0, 1, 1000000)));
  const RequestId timer = post(t.postLocal(local(1, 150000)));
  std::map<RequestId, double> times;
  drain(t, &times, 2);
  EXPECT_NEAR(times[s], 100.0, kTol);
  EXPECT_NEAR(times[timer], 150.0, kTol);
  const RequestId r = post(t.postRecv(recv(1, 0, 1000000)));
  drain(t, &times, 3);
  EXPECT_NEAR(times[r], 150.0, kTol);
}

TEST(SimTransportTest, ReceivePostedBetweenDataEndAndDeliveryWaitsForDelivery) {
  // B = 10 GB/s, a = 50 us, M = 1e6: data ends at 100 us, delivery at 150 us. The receive is posted at 120 us
  // (after a 120 us local op): it completes at max(120, 150) = 150 us.
  const Topology topo = lineTopology(2, 10, 50);
  SimModel m = SimModel::ideal();
  m.local_gbps = 1;  // 120000 bytes take 120 us
  SimTransport t(topo, m);
  const RequestId s = post(t.postSend(send(0, 1, 1000000)));
  const RequestId timer = post(t.postLocal(local(1, 120000)));
  std::map<RequestId, double> times;
  drain(t, &times, 2);
  EXPECT_NEAR(times[s], 100.0, kTol);
  EXPECT_NEAR(times[timer], 120.0, kTol);
  const RequestId r = post(t.postRecv(recv(1, 0, 1000000)));
  drain(t, &times, 3);
  EXPECT_NEAR(times[r], 150.0, kTol);
}

TEST(SimTransportTest, TwoFlowsSharingALinkTakeTwiceAsLong) {
  // Star of 3 GPUs (B = 10 GB/s, a = 1 us per hop). 0->2 and 1->2 share the downlink switch->gpu2: each
  // gets B/2, so both data phases end at 2M/B = 200 us, receives at 200 + 2a = 202 us.
  const Topology topo = starTopology(3, 10, 1);
  SimTransport t(topo, SimModel::ideal(), /*record_timeline=*/true);
  const RequestId r0 = post(t.postRecv(recv(2, 0, 1000000)));
  const RequestId r1 = post(t.postRecv(recv(2, 1, 1000000)));
  const RequestId s0 = post(t.postSend(send(0, 2, 1000000)));
  const RequestId s1 = post(t.postSend(send(1, 2, 1000000)));
  std::map<RequestId, double> times;
  drain(t, &times, 4);
  EXPECT_NEAR(times[s0], 200.0, kTol);
  EXPECT_NEAR(times[s1], 200.0, kTol);
  EXPECT_NEAR(times[r0], 202.0, kTol);
  EXPECT_NEAR(times[r1], 202.0, kTol);

  // Stats: every link of both routes carried M bytes per flow; each was busy for the 200 us data phase.
  const SimStats& st = t.stats();
  const int sw = topo.findVertex("nvswitch");
  const int down = topo.linksBetween(sw, topo.gpuVertex(2)).at(0);
  const int up0 = topo.linksBetween(topo.gpuVertex(0), sw).at(0);
  EXPECT_DOUBLE_EQ(st.link_bytes[down], 2e6);
  EXPECT_DOUBLE_EQ(st.link_bytes[up0], 1e6);
  EXPECT_NEAR(st.link_busy_us[down], 200.0, kTol);
  EXPECT_NEAR(st.link_busy_us[up0], 200.0, kTol);
  EXPECT_EQ(st.messages, 2);

  // Timeline: the shared downlink carried 10 GB/s (two messages of 5) for [0, 200]; the uplink 5 GB/s.
  int seen = 0;
  for (const LinkSegment& seg : t.timeline()) {
    if (seg.link == down) {
      ++seen;
      EXPECT_NEAR(seg.start_us, 0.0, kTol);
      EXPECT_NEAR(seg.end_us, 200.0, kTol);
      EXPECT_NEAR(seg.gbps, 10.0, 1e-9);
      EXPECT_EQ(seg.messages, 2);
    }
    if (seg.link == up0) {
      EXPECT_NEAR(seg.gbps, 5.0, 1e-9);
      EXPECT_EQ(seg.messages, 1);
    }
  }
  EXPECT_EQ(seen, 1);
}

TEST(SimTransportTest, TwoChannelsOfOnePairShareTheLink) {
  // Same pair, channels 0 and 1: two connections, two flows on one link -> 2M/B = 200 us each.
  const Topology topo = lineTopology(2, 10, 0);
  SimTransport t(topo, SimModel::ideal());
  post(t.postRecv(recv(1, 0, 1000000, 0)));
  post(t.postRecv(recv(1, 0, 1000000, 1)));
  const RequestId s0 = post(t.postSend(send(0, 1, 1000000, 0)));
  const RequestId s1 = post(t.postSend(send(0, 1, 1000000, 1)));
  std::map<RequestId, double> times;
  drain(t, &times, 4);
  EXPECT_NEAR(times[s0], 200.0, kTol);
  EXPECT_NEAR(times[s1], 200.0, kTol);
}

TEST(SimTransportTest, RateIsRecomputedWhenAFlowJoins) {
  // Star, B = 10 GB/s (1e4 bytes/us), a = 0. Flow A (0->2, M = 1e6) starts at 0 alone at B. At t1 = 50 us
  // (after a 50 us local op on rank 1) flow B (1->2, M) joins on the downlink: both get B/2.
  //   A: 5e5 bytes by t1; the other 5e5 at 5e3 bytes/us take 100 us -> A ends at 150 us.
  //   B: 5e5 bytes in [50, 150] at B/2, the other 5e5 alone at B in 50 us -> B ends at 200 us.
  const Topology topo = starTopology(3, 10, 0);
  SimModel m = SimModel::ideal();
  m.local_gbps = 1;  // 50000 bytes take 50 us
  SimTransport t(topo, m);
  post(t.postRecv(recv(2, 0, 1000000)));
  post(t.postRecv(recv(2, 1, 1000000)));
  const RequestId a = post(t.postSend(send(0, 2, 1000000)));
  const RequestId timer = post(t.postLocal(local(1, 50000)));
  std::map<RequestId, double> times;
  drain(t, &times, 1);
  ASSERT_NEAR(times[timer], 50.0, kTol);
  const RequestId b = post(t.postSend(send(1, 2, 1000000)));
  drain(t, &times, 5);
  EXPECT_NEAR(times[a], 150.0, 1e-9);
  EXPECT_NEAR(times[b], 200.0, 1e-9);
}

TEST(SimTransportTest, SlicesOfOneConnectionPipelineBehindEachOther) {
  // Three slices of M = 1e6 on one connection (B = 10 GB/s, a = 5 us): data phases run one after another
  // (k M/B for slice k), and the latency of each overlaps the next slice's data (cut-through):
  // receive k completes at k M/B + a = 105, 205, 305 us.
  const Topology topo = lineTopology(2, 10, 5);
  SimTransport t(topo, SimModel::ideal());
  Messages run = runMessages(t, 3, 1000000);
  for (int k = 0; k < 3; ++k) {
    EXPECT_NEAR(run.times[run.sends[k]], 100.0 * (k + 1), kTol);
    EXPECT_NEAR(run.times[run.recvs[k]], 100.0 * (k + 1) + 5, kTol);
  }
}

TEST(SimTransportTest, FifoMatchingPairsSendsAndReceivesInOrder) {
  // Two messages on one connection, 2e6 then 1e6 bytes (B = 10 GB/s, a = 1): receive 1 gets the first send
  // (200 + 1 us), receive 2 the second (300 + 1 us).
  const Topology topo = lineTopology(2, 10, 1);
  SimTransport t(topo, SimModel::ideal());
  const RequestId r1 = post(t.postRecv(recv(1, 0, 2000000)));
  const RequestId r2 = post(t.postRecv(recv(1, 0, 1000000)));
  post(t.postSend(send(0, 1, 2000000)));
  post(t.postSend(send(0, 1, 1000000)));
  std::map<RequestId, double> times;
  drain(t, &times, 4);
  EXPECT_NEAR(times[r1], 201.0, kTol);
  EXPECT_NEAR(times[r2], 301.0, kTol);
}

TEST(SimTransportTest, ManySmallMessagesAreBoundByTheNicGap) {
  // LogGP g: 100 zero-byte messages from gpu0 to gpu1 on 100 channels (so no sender overhead queue), g = 0.5,
  // o = 0, alphas 0. Message k passes nic0 in [k g, (k+1) g] and nic1 in [(k+1) g, (k+2) g]: the last one
  // (k = 99) is delivered at 101 g = 50.5 us >= 100 g.
  const Topology topo = twoNodeTopology(20, 0, 20, 0);
  SimModel m = SimModel::ideal();
  m.nic_gap_us = 0.5;
  SimTransport t(topo, m);
  Messages run = runMessages(t, 100, 0, /*own_channels=*/true);
  double last = 0;
  for (RequestId r : run.recvs) last = std::max(last, run.times[r]);
  EXPECT_NEAR(last, 101 * 0.5, kTol);
  EXPECT_GE(last, 100 * 0.5);
  EXPECT_NEAR(run.times[run.recvs[0]], 2 * 0.5, kTol);
}

TEST(SimTransportTest, SenderOverheadIsSerializedPerConnection) {
  // LogGP o = 0.3 on one connection, 10 zero-byte messages, no NICs, alpha a = 1: message k (1-based) ends
  // its sender overhead at k o, is delivered at k o + a + o. Last: 10 * 0.3 + 1 + 0.3 = 4.3 us.
  // On 10 different channels the overheads run in parallel: every receive at o + a + o = 1.6 us.
  const Topology topo = lineTopology(2, 10, 1);
  SimModel m = SimModel::ideal();
  m.message_overhead_us = 0.3;
  {
    SimTransport t(topo, m);
    Messages run = runMessages(t, 10, 0);
    for (int k = 0; k < 10; ++k) EXPECT_NEAR(run.times[run.recvs[k]], (k + 1) * 0.3 + 1 + 0.3, 1e-9);
  }
  {
    SimTransport t(topo, m);
    Messages run = runMessages(t, 10, 0, /*own_channels=*/true);
    for (int k = 0; k < 10; ++k) EXPECT_NEAR(run.times[run.recvs[k]], 0.3 + 1 + 0.3, 1e-9);
  }
}

TEST(SimTransportTest, LLHalvesTheBandwidth) {
  // LL carries 8 data bytes per 16-byte line: efficiency 0.5 (the defaults' value on every link kind except
  // calibrated NVLink). M = 1e6 over B = 10 GB/s with a = 1 takes M/B + a = 101 us with Simple and
  // M/(B/2) + a = 201 us with LL.
  const SimModel d = SimModel::defaults();
  const int pcie = static_cast<int>(LinkKind::kPcie);
  EXPECT_DOUBLE_EQ(d.efficiency[static_cast<int>(Protocol::kLL)][pcie],
                   0.5 * d.efficiency[static_cast<int>(Protocol::kSimple)][pcie]);
  SimModel m = SimModel::ideal();
  for (int k = 0; k < kNumLinkKinds; ++k) m.efficiency[static_cast<int>(Protocol::kLL)][k] = 0.5;
  const Topology topo = lineTopology(2, 10, 1);
  for (Protocol p : {Protocol::kSimple, Protocol::kLL}) {
    SimTransport t(topo, m);
    const RequestId r = post(t.postRecv(recv(1, 0, 1000000, 0, p)));
    post(t.postSend(send(0, 1, 1000000, 0, p)));
    std::map<RequestId, double> times;
    drain(t, &times, 2);
    EXPECT_NEAR(times[r], p == Protocol::kLL ? 201.0 : 101.0, 1e-9) << protocolName(p);
  }
}

TEST(SimTransportTest, FifoDepthLimitsSlicesInFlight) {
  // fifo_depth 2, four sends of M = 1e6 (B = 10 GB/s, a = 0) and no receive: only two may go (ending at
  // 100 and 200 us). A 1000 us timer on rank 1, then one receive: it matches send 1 (delivered at 100, so it
  // completes at once, 1000 us) and frees one credit: send 3 starts at 1000 and ends at 1100 us.
  // Send 4 still waits: with nothing else to do, a blocking poll reports the deadlock.
  const Topology topo = lineTopology(2, 10, 0);
  SimModel m = SimModel::ideal();
  m.fifo_depth = 2;
  m.local_gbps = 1;
  SimTransport t(topo, m);
  std::vector<RequestId> sends;
  for (int k = 0; k < 4; ++k) sends.push_back(post(t.postSend(send(0, 1, 1000000))));
  const RequestId timer = post(t.postLocal(local(1, 1000000)));
  std::map<RequestId, double> times;
  drain(t, &times, 3);
  EXPECT_NEAR(times[sends[0]], 100.0, kTol);
  EXPECT_NEAR(times[sends[1]], 200.0, kTol);
  EXPECT_NEAR(times[timer], 1000.0, kTol);
  EXPECT_EQ(times.count(sends[2]), 0u);
  const RequestId r1 = post(t.postRecv(recv(1, 0, 1000000)));
  drain(t, &times, 5);
  EXPECT_NEAR(times[r1], 1000.0, kTol);
  EXPECT_NEAR(times[sends[2]], 1100.0, kTol);
  std::vector<Completion> done;
  const Status s = t.poll(&done, true);
  EXPECT_EQ(s.code(), StatusCode::kInternalError);
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank 0 waits to send 1 message(s) to rank 1 on channel 0"), std::string::npos)
      << s.message();
  // The receive for send 2 unblocks send 4: 1100 + 100.
  post(t.postRecv(recv(1, 0, 1000000)));
  drain(t, &times, 7);
  EXPECT_NEAR(times[sends[3]], 1200.0, kTol);
}

TEST(SimTransportTest, ReceiveWithoutSendIsADeadlockNotAHang) {
  const Topology topo = lineTopology(3, 10, 1);
  SimTransport t(topo, SimModel::defaults());
  post(t.postRecv(recv(1, 0, 4096, 3)));
  std::vector<Completion> done;
  const Status s = t.poll(&done, true);
  EXPECT_EQ(s.code(), StatusCode::kInternalError);
  EXPECT_NE(s.message().find("rank 1 waits for 1 message(s) from rank 0 on channel 3"), std::string::npos)
      << s.message();
  EXPECT_TRUE(done.empty());
  // A non-blocking poll is not an error.
  EXPECT_TRUE(t.poll(&done, false).isOk());
}

TEST(SimTransportTest, LocalRequestsTakeBytesOverLocalBandwidthAndFusedOnesNothing) {
  // local_gbps = 100 (1e5 bytes/us): 2e6 bytes take 20 us; two on one rank do not queue; a fused one is
  // complete at once, before any blocking wait.
  const Topology topo = lineTopology(2, 10, 1);
  SimModel m = SimModel::ideal();
  m.local_gbps = 100;
  SimTransport t(topo, m);
  const RequestId fused = post(t.postLocal(local(0, 2000000, true)));
  std::vector<Completion> done;
  ASSERT_TRUE(t.poll(&done, false).isOk());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, fused);
  EXPECT_EQ(done[0].time_us, 0.0);
  const RequestId a = post(t.postLocal(local(0, 2000000)));
  const RequestId b = post(t.postLocal(local(0, 2000000)));
  std::map<RequestId, double> times;
  drain(t, &times, 2);
  EXPECT_NEAR(times[a], 20.0, kTol);
  EXPECT_NEAR(times[b], 20.0, kTol);
}

TEST(SimTransportTest, ErrorsNameTheRanks) {
  // Two GPUs with no link between them: no route.
  Topology topo;
  topo.name = "islands";
  const int node = topo.addNode("n0");
  topo.addVertex(VertexKind::kGpu, node);
  topo.addVertex(VertexKind::kGpu, node);
  SimTransport t(topo, SimModel::ideal());
  Result<RequestId> r = t.postSend(send(0, 1, 10));
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no route from rank 0 to rank 1"), std::string::npos) << r.status().message();
  Result<RequestId> bad = t.postRecv(recv(5, 0, 10));
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("rank 5"), std::string::npos) << bad.status().message();
  Result<RequestId> self = t.postSend(send(1, 1, 10));
  ASSERT_FALSE(self.isOk());
  EXPECT_EQ(self.status().code(), StatusCode::kInvalidArgument);
}

TEST(SimTransportTest, DefaultsAreSane) {
  // The defaults' documented sources: LL128 120/128 of Simple, NCCL_STEPS = 8, NCCL slot sizes, Ring base
  // latencies, hop latencies that grow LL < LL128 < Simple (as NCCL's hwLatencies) — on PCIe; NVLink's values are
  // calibrated (docs/simulator.md) and only bounded here: efficiencies in (0, 1.25] with LL below Simple.
  const SimModel d = SimModel::defaults();
  const int simple = static_cast<int>(Protocol::kSimple), ll = static_cast<int>(Protocol::kLL),
            ll128 = static_cast<int>(Protocol::kLL128), nvl = static_cast<int>(LinkKind::kNvlink);
  const int pcie = static_cast<int>(LinkKind::kPcie);
  EXPECT_DOUBLE_EQ(d.efficiency[ll128][pcie], d.efficiency[simple][pcie] * 120.0 / 128.0);
  for (int p : {simple, ll, ll128}) {
    EXPECT_GT(d.efficiency[p][nvl], 0.0);
    EXPECT_LE(d.efficiency[p][nvl], 1.25);
  }
  EXPECT_LT(d.efficiency[ll][nvl], d.efficiency[simple][nvl]);
  EXPECT_EQ(d.fifo_depth, 8);
  EXPECT_EQ(d.slice_bytes[simple], 524288u);
  EXPECT_EQ(d.slice_bytes[ll], 32768u);
  EXPECT_EQ(d.slice_bytes[ll128], 576000u);
  EXPECT_LT(d.hop_latency_us[ll][pcie], d.hop_latency_us[ll128][pcie]);
  EXPECT_LT(d.hop_latency_us[ll128][pcie], d.hop_latency_us[simple][pcie]);
  EXPECT_GT(d.message_overhead_us, 0);
  EXPECT_GT(d.nic_gap_us, 0);
  const SimModel i = SimModel::ideal();
  EXPECT_EQ(i.slice_bytes[simple], kUnlimitedBytes);
  EXPECT_EQ(i.launch_us[simple], 0.0);
  EXPECT_TRUE(std::isinf(i.local_gbps));
}

}  // namespace
}  // namespace braid
