// simulate(): lowering + executor + SimTransport on hand-computable cases. Expected times are closed forms
// derived in the comments from the cost order of runtime/transport/sim/sim_transport.cc, with
// SimModel::ideal() (no overheads, no protocol latency, no launch, one slice per step, free local copies)
// unless stated. Units: bytes, us, GB/s (1 GB/s = 1e3 bytes/us).
#include "braid/simulate.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braid/algorithm.h"
#include "braid/classic.h"
#include "braid/topology.h"
#include "support/small_topologies.h"

namespace braid {
namespace {

using testing::lineTopology;
using testing::ringTopology;
using testing::starTopology;

Algorithm classic(ClassicAlgo algo, CollectiveKind kind, int n, bool in_place, const Topology* topology = nullptr) {
  ClassicRequest req;
  req.algo = algo;
  req.spec.kind = kind;
  req.spec.num_ranks = n;
  req.spec.chunk_factor = 0;
  req.spec.in_place = in_place;
  req.topology = topology;
  Result<Algorithm> a = buildClassic(req);
  EXPECT_TRUE(a.isOk()) << a.status().toString();
  return a.isOk() ? a.value() : Algorithm{};
}

SimOptions idealOptions(uint64_t size, bool in_place = false) {
  SimOptions o;
  o.size_bytes = size;
  o.in_place = in_place;
  o.model = SimModel::ideal();
  return o;
}

TEST(SimulateTest, RingAllGatherIsNMinusOneAlphaBetaSteps) {
  // Ring all-gather, n ranks, output M bytes, B = 10 GB/s, a = 1.5 us. Each of the n-1 steps moves one
  // chunk of M/n over one link after the previous chunk arrived: (n-1)(a + M/(nB)).
  // M = 125000 n: M/(nB) = 125000 / 1e4 = 12.5 us, so T = 14 (n-1) us.
  for (int n = 2; n <= 8; ++n) {
    const Topology topo = ringTopology(n, 10, 1.5);
    for (bool in_place : {false, true}) {
      const Algorithm alg = classic(ClassicAlgo::kRing, CollectiveKind::kAllGather, n, in_place);
      const uint64_t m = 125000ull * n;
      Result<SimResult> r = simulate(alg, topo, idealOptions(m, in_place));
      ASSERT_TRUE(r.isOk()) << r.status().toString();
      EXPECT_NEAR(r->time_us, (n - 1) * (1.5 + m / (n * 10.0 * 1e3)), 1e-9) << "n=" << n << " in_place=" << in_place;
      EXPECT_EQ(r->stats.messages, static_cast<long long>(n) * (n - 1)) << "one message per send step";
    }
  }
}

TEST(SimulateTest, DirectAllToAllSharesEachUplink) {
  // n GPUs on one switch (B = 20 GB/s, a = 0.5 us per hop). Every GPU sends n-1 messages of M/n at once:
  // its uplink carries n-1 flows and every downlink n-1 flows, so each flow moves at B/(n-1) and all end at
  // (n-1)(M/n)/B; the tail arrives 2a later (both hops): T = 2a + (n-1) M / (n B).
  for (int n = 2; n <= 8; ++n) {
    const Topology topo = starTopology(n, 20, 0.5);
    const Algorithm alg = classic(ClassicAlgo::kDirect, CollectiveKind::kAllToAll, n, false);
    const uint64_t m = 100000ull * n;  // M/n = 1e5 bytes = 5 us alone on a link
    Result<SimResult> r = simulate(alg, topo, idealOptions(m));
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_NEAR(r->time_us, 2 * 0.5 + (n - 1) * (m / n) / (20 * 1e3), 1e-9) << "n=" << n;
  }
}

// Broadcast from rank 0 along 0 -> 1 -> 2: rank 1 receives and forwards (recv-copy-send). In-place only.
Algorithm relayBroadcast() {
  Algorithm a;
  a.name = "relay";
  a.collective = CollectiveKind::kBroadcast;
  a.collective_name = "broadcast";
  a.num_ranks = 3;
  a.num_chunks = 1;
  a.num_channels = 1;
  a.in_place = true;
  a.out_of_place = false;
  a.root = 0;
  for (int r = 0; r < 3; ++r) {
    RankProgram p;
    p.rank = r;
    p.input_chunks = 1;
    p.output_chunks = 1;
    Threadblock tb;
    tb.id = 0;
    tb.send_peer = r < 2 ? r + 1 : -1;
    tb.recv_peer = r > 0 ? r - 1 : -1;
    Step s;
    s.count = 1;
    if (r == 0) {
      s.type = OpType::kSend;
      s.src_buf = BufferKind::kInput;
      s.src_off = 0;
    } else {
      s.type = r == 1 ? OpType::kRecvCopySend : OpType::kRecv;
      s.dst_buf = BufferKind::kOutput;
      s.dst_off = 0;
    }
    tb.steps.push_back(s);
    p.threadblocks.push_back(tb);
    a.ranks.push_back(p);
  }
  return a;
}

TEST(SimulateTest, TwoHopRelayPipelinesSlices) {
  // Line 0 - 1 - 2, B = 10 GB/s, a = 3 us, M = 1.6e6 bytes, k slices of M/k, t = M/(kB).
  // Slice j (1-based) leaves rank 0 at j t (one connection's data phases run back to back) and reaches rank 1
  // at j t + a; rank 1 forwards it as soon as it arrived and its previous slice has left: its data phase is
  // [j t + a, (j+1) t + a]. The last slice reaches rank 2 at (k+1) t + 2a:
  //   T(k) = 2a + (k+1) M / (k B);   k = 1: 2(a + M/B).
  const Algorithm alg = relayBroadcast();
  ASSERT_TRUE(verify(alg).ok) << verify(alg).toString();
  const Topology topo = lineTopology(3, 10, 3);
  const double m = 1.6e6, b = 10 * 1e3, a = 3;
  for (int k : {1, 2, 4, 8, 16}) {
    SimOptions o = idealOptions(static_cast<uint64_t>(m));
    o.model.slice_bytes[static_cast<int>(Protocol::kSimple)] = static_cast<uint64_t>(m) / k;
    Result<SimResult> r = simulate(alg, topo, o);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_NEAR(r->time_us, 2 * a + (k + 1) * m / (k * b), 1e-9) << "k=" << k;
    EXPECT_EQ(r->stats.messages, 2 * k);
  }
  // One slice is store-and-forward: exactly 2(a + M/B).
  Result<SimResult> one = simulate(alg, topo, idealOptions(static_cast<uint64_t>(m)));
  ASSERT_TRUE(one.isOk()) << one.status().toString();
  EXPECT_NEAR(one->time_us, 2 * (a + m / b), 1e-9);
}

TEST(SimulateTest, SlicesPerIterationPayAlphaOncePerIteration) {
  // Ring all-gather on 2 ranks: each rank's threadblock sends its chunk c = 800000 bytes, then receives the other's,
  // both in S = 8 slices of 100000 bytes (t = 10 us at B = 10 GB/s), a = 1.5 us. An iteration of k slices posts its
  // k sends (data phases back to back: k t), then its k receives, which complete when the peer's last slice of the
  // iteration arrived, k t + a after the iteration began; both ranks start every iteration together, so
  //   T(k) = ceil(S / k) (k t + a) with the last iteration's k cut to what is left = S t + ceil(S / k) a.
  // k = 1: 8 (t + a) = 92 us; k = 2: 86; k = 3: 84.5; k = 8: 81.5.
  const Topology topo = ringTopology(2, 10, 1.5);
  const Algorithm alg = classic(ClassicAlgo::kRing, CollectiveKind::kAllGather, 2, false);
  const uint64_t m = 2 * 800000;
  for (uint32_t k : {1u, 2u, 3u, 4u, 8u, 16u}) {
    SimOptions o = idealOptions(m);
    o.model.slice_bytes[static_cast<int>(Protocol::kSimple)] = 100000;
    o.slices_per_iteration = k;
    Result<SimResult> r = simulate(alg, topo, o);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const double iterations = static_cast<double>((8 + k - 1) / k);
    EXPECT_NEAR(r->time_us, 8 * 10.0 + iterations * 1.5, 1e-9) << "k=" << k;
    EXPECT_EQ(r->stats.messages, 2 * 8) << "one message per slice whatever the iteration";
  }
}

TEST(SimulateTest, NcclRunnableIteratesAsNcclsRingInSimple) {
  // ncclRunnable(kRing): Simple runs NCCL's ring chunk (2 slices of 1 MiB per iteration, 4 slices of FIFO); LL, and
  // every other algorithm, run the model's own slices.
  const Topology topo = ringTopology(4, 20, 5);
  const Algorithm alg = classic(ClassicAlgo::kRing, CollectiveKind::kAllReduce, 4, false);
  SimOptions simple;
  simple.size_bytes = 64 << 20;
  simple.protocol = Protocol::kSimple;
  SimOptions nccl = simple;
  nccl.model.slice_bytes[static_cast<int>(Protocol::kSimple)] = uint64_t{1} << 20;
  nccl.slices_per_iteration = 2;
  nccl.model.fifo_depth = 4;
  Result<SimResult> as_nccl = simulate(ncclRunnable(&alg, &topo, NcclAlgo::kRing), simple);
  Result<SimResult> by_hand = simulate(alg, topo, nccl);
  Result<SimResult> plain = simulate(alg, topo, simple);
  ASSERT_TRUE(as_nccl.isOk() && by_hand.isOk() && plain.isOk()) << as_nccl.status().toString();
  EXPECT_EQ(as_nccl->time_us, by_hand->time_us);
  // Alpha 5 us on every link against 26 us per 512 KiB slot: paid per 2 MiB iteration instead of per slot.
  EXPECT_LT(as_nccl->time_us, 0.95 * plain->time_us);
  Result<SimResult> tree_like = simulate(ncclRunnable(&alg, &topo, NcclAlgo::kTree), simple);
  ASSERT_TRUE(tree_like.isOk());
  EXPECT_EQ(tree_like->time_us, plain->time_us);
  SimOptions ll = simple;
  ll.protocol = Protocol::kLL;
  Result<SimResult> ring_ll = simulate(ncclRunnable(&alg, &topo, NcclAlgo::kRing), ll);
  Result<SimResult> plain_ll = simulate(alg, topo, ll);
  ASSERT_TRUE(ring_ll.isOk() && plain_ll.isOk());
  EXPECT_EQ(ring_ll->time_us, plain_ll->time_us);
  EXPECT_EQ(simulate(Runnable{}, simple).status().code(), StatusCode::kInvalidArgument);
}

TEST(SimulateTest, LaunchLatencyIsAddedOnceAndTimelineOnlyWhenAsked) {
  // Ring all-gather on 4 ranks as above (T = 3 x 14 us) plus launch_us[Simple] = 7 us.
  const Topology topo = ringTopology(4, 10, 1.5);
  const Algorithm alg = classic(ClassicAlgo::kRing, CollectiveKind::kAllGather, 4, false);
  SimOptions o = idealOptions(500000);
  o.model.launch_us[static_cast<int>(Protocol::kSimple)] = 7;
  Result<SimResult> r = simulate(alg, topo, o);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_NEAR(r->time_us, 7 + 3 * 14.0, 1e-9);
  EXPECT_TRUE(r->timeline.empty());
  o.record_timeline = true;
  Result<SimResult> with = simulate(alg, topo, o);
  ASSERT_TRUE(with.isOk()) << with.status().toString();
  // Every ring link gpu i -> gpu i+1 carries 3 chunks of 125000 bytes, one at a time at 10 GB/s.
  ASSERT_FALSE(with->timeline.empty());
  double busy = 0;
  for (const LinkSegment& s : with->timeline) {
    EXPECT_NEAR(s.gbps, 10.0, 1e-9);
    busy += s.end_us - s.start_us;
  }
  EXPECT_NEAR(busy, 4 * 3 * 12.5, 1e-6);
  double bytes = 0;
  for (double x : with->stats.link_bytes) bytes += x;
  EXPECT_DOUBLE_EQ(bytes, 4 * 3 * 125000.0);
}

TEST(SimulateTest, PlacementErrors) {
  const Topology topo = ringTopology(4, 10, 1);
  const Algorithm alg = classic(ClassicAlgo::kRing, CollectiveKind::kAllGather, 5, false);
  Result<SimResult> r = simulate(alg, topo, idealOptions(500000));
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  // Direct all-to-all on a line: ranks 0 and 2 have no route (it would pass through GPU 1).
  const Topology line = lineTopology(3, 10, 1);
  const Algorithm direct = classic(ClassicAlgo::kDirect, CollectiveKind::kAllToAll, 3, false);
  Result<SimResult> d = simulate(direct, line, idealOptions(300000));
  ASSERT_FALSE(d.isOk());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
}

TEST(SimulateTest, ShippedDgx1RingAllReduceWithDefaults) {
  // Ring all-reduce on the shipped DGX-1 (NVLink rings), default model (fifo_depth 8 included), 1 MiB .. 1 GiB:
  // time grows with the size, and bus bandwidth 2(n-1)/n x size / time stays below every GPU's total NVLink
  // injection bandwidth (the all-reduce lower bound 2(n-1)/n x size / B, anchors_algorithms.md §4).
  Result<Topology> topo = loadTopologyOrShipped("dgx1-v100");
  ASSERT_TRUE(topo.isOk()) << topo.status().toString();
  const int n = topo->numGpus();
  ASSERT_EQ(n, 8);
  double injection = 1e300;
  for (int r = 0; r < n; ++r) {
    double sum = 0;
    for (int l : topo->outLinks(topo->gpuVertex(r))) {
      if (topo->links[l].kind == LinkKind::kNvlink) sum += topo->links[l].bandwidth_gbps;
    }
    injection = std::min(injection, sum);
  }
  ASSERT_NEAR(injection, 120.0, 1e-9);  // 6 NVLinks of 20 GB/s per V100
  const Algorithm alg = classic(ClassicAlgo::kRing, CollectiveKind::kAllReduce, n, false, &topo.value());
  double last = 0;
  for (uint64_t size = 1ull << 20; size <= 1ull << 30; size <<= 2) {
    SimOptions o;
    o.size_bytes = size;
    Result<SimResult> r = simulate(alg, *topo, o);
    ASSERT_TRUE(r.isOk()) << size << " bytes: " << r.status().toString();
    EXPECT_GT(r->time_us, last) << size;
    last = r->time_us;
    const double busbw = static_cast<double>(size) / r->time_us / 1e3 * 2.0 * (n - 1) / n;
    EXPECT_GT(busbw, 0);
    EXPECT_LT(busbw, injection) << size;
    EXPECT_GT(r->time_us, SimModel::defaults().launch_us[static_cast<int>(alg.protocol)]);
  }
}

}  // namespace
}  // namespace braid
