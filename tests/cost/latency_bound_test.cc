// Latency bound (latencyBound) and the combined bound of one nccl-tests call (collectiveBound), against closed
// forms on rings and switches.
#include <gtest/gtest.h>

#include <string>

#include "braid/bounds.h"
#include "braid/topology.h"

namespace braid {
namespace {

// n GPUs in a bidirectional ring of direct links (alpha `a` us, 10 GB/s).
Topology gpuRing(int n, double a) {
  Topology t;
  t.name = "ring" + std::to_string(n);
  const int node = t.addNode("node0");
  for (int i = 0; i < n; ++i) t.addVertex(VertexKind::kGpu, node);
  for (int i = 0; i < n; ++i) t.addDuplexLink(t.gpuVertex(i), t.gpuVertex((i + 1) % n), LinkKind::kNvlink, 10, a);
  return t;
}

Topology gpuSwitch(int n, double bw, double a) {
  Topology t;
  t.name = "switch";
  const int node = t.addNode("node0");
  const int sw = t.addVertex(VertexKind::kNvSwitch, node, "sw");
  for (int i = 0; i < n; ++i) t.addDuplexLink(t.addVertex(VertexKind::kGpu, node), sw, LinkKind::kNvlink, bw, a);
  return t;
}

TEST(LatencyBound, RingOfGpus) {
  // Steps ceil(log2 n); the nearest GPUs are one hop apart (a), the farthest floor(n/2) hops (floor(n/2) a).
  // The bound is the diameter; steps x a is the single-port figure. n = 5: steps 3, diameter 2a; n = 8: steps 3,
  // diameter 4a; n = 9: steps 4, diameter 4a.
  const double a = 0.7;
  struct Want {
    int n, steps, half;
  };
  for (const Want& w : {Want{5, 3, 2}, Want{8, 3, 4}, Want{9, 4, 4}, Want{2, 1, 1}}) {
    Result<LatencyBound> b = latencyBound(gpuRing(w.n, a), CollectiveKind::kAllReduce);
    ASSERT_TRUE(b.isOk()) << b.status().toString();
    EXPECT_EQ(b->steps, w.steps) << w.n;
    EXPECT_NEAR(b->min_alpha_us, a, 1e-12) << w.n;
    EXPECT_NEAR(b->diameter_us, w.half * a, 1e-12) << w.n;
    EXPECT_NEAR(b->time_us, w.half * a, 1e-12) << w.n;
    EXPECT_NEAR(b->single_port_us, w.steps * a, 1e-12) << w.n;
  }
}

TEST(LatencyBound, SwitchIsTwoHopsEverywhere) {
  // Every pair is GPU -> switch -> GPU: 2a = 0.7 us, the bound. Single-port: 3 steps x 0.7 = 2.1 us.
  Result<LatencyBound> b = latencyBound(gpuSwitch(8, 100, 0.35), CollectiveKind::kAllGather);
  ASSERT_TRUE(b.isOk());
  EXPECT_NEAR(b->min_alpha_us, 0.7, 1e-12);
  EXPECT_NEAR(b->diameter_us, 0.7, 1e-12);
  EXPECT_NEAR(b->time_us, 0.7, 1e-12);
  EXPECT_NEAR(b->single_port_us, 2.1, 1e-12);
}

TEST(LatencyBound, EdgeCases) {
  Result<LatencyBound> one = latencyBound(gpuSwitch(1, 100, 0.35), CollectiveKind::kAllReduce);
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(one->steps, 0);
  EXPECT_EQ(one->time_us, 0);
  EXPECT_FALSE(latencyBound(gpuSwitch(4, 100, 0.35), CollectiveKind::kCustom).isOk());
}

TEST(CollectiveBound, SwitchClosedForms) {
  // n = 8 GPUs on a switch at B = 100 GB/s (1e5 bytes/us), alpha 0.35 per link; S = 8e6 bytes.
  //   all-gather: each GPU receives the 7 other shares of S/8 through its downlink: 7 x 1e6 / 1e5 = 70 us;
  //   reduce-scatter: the same out of its uplink: 70 us; all-reduce: both, 140 us;
  //   all-to-all: (n-1)/n x S / B = 7/8 x 8e6 / 1e5 = 70 us.
  //   latency: the diameter GPU -> switch -> GPU, 0.7 us, below every bandwidth term.
  const Topology t = gpuSwitch(8, 100, 0.35);
  const uint64_t size = 8'000'000;
  struct Want {
    CollectiveKind kind;
    double us;
  };
  for (const Want& w : {Want{CollectiveKind::kAllGather, 70}, Want{CollectiveKind::kReduceScatter, 70},
                        Want{CollectiveKind::kAllReduce, 140}, Want{CollectiveKind::kAllToAll, 70}}) {
    Result<CollectiveBound> b = collectiveBound(t, w.kind, size);
    ASSERT_TRUE(b.isOk()) << b.status().toString();
    EXPECT_NEAR(b->bandwidth_us, w.us, 1e-9) << collectiveName(w.kind);
    EXPECT_NEAR(b->latency_us, 0.7, 1e-12);
    EXPECT_NEAR(b->time_us, w.us, 1e-9);
    EXPECT_FALSE(b->cut.empty());
  }
  // A tiny call is latency-bound: 8 bytes of all-gather move in 7 x 1 / 1e5 us, far below 0.7 us.
  Result<CollectiveBound> tiny = collectiveBound(t, CollectiveKind::kAllGather, 8);
  ASSERT_TRUE(tiny.isOk());
  EXPECT_NEAR(tiny->time_us, 0.7, 1e-12);
  EXPECT_EQ(collectiveBound(t, CollectiveKind::kBroadcast, size).status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace braid
