// routeBound (the route-constrained LP bound) and its place in collectiveBound(s): values derived by hand on
// shipped and hand-built topologies, the node-level rows, missing routes, errors, and the 128-GPU size.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "braid/bounds.h"
#include "braid/topology.h"
#include "support/small_topologies.h"

namespace braid {
namespace {

constexpr double kM = 1e6;  // bytes per rank (all-gather, reduce-scatter, all-reduce)

Topology shipped(const std::string& name) {
  Result<Topology> t = loadTopologyOrShipped(name);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? *t : Topology{};
}

double route(const Topology& t, CollectiveKind kind, double bytes) {
  Result<double> r = routeBound(t, kind, bytes);
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  return r.isOk() ? *r : -1;
}

void expectRel(double got, double want, const std::string& what) { EXPECT_NEAR(got, want, 1e-9 * want) << what; }

// Two nodes of two GPUs: GPUs on an NVSwitch at 100 GB/s, and on a PCIe switch (20 GB/s) with the node's NIC
// (20 GB/s); the NICs meet at a network switch at 10 GB/s. GPU pairs of one node talk over the NVSwitch (100 > 20),
// pairs across nodes over PCIe -> NIC -> network (10 GB/s bottleneck).
Topology twoNodes() {
  Topology t;
  t.name = "two-nodes";
  const int net = t.addVertex(VertexKind::kNetSwitch, -1, "net");
  for (int q = 0; q < 2; ++q) {
    const int node = t.addNode("node" + std::to_string(q));
    const int g0 = t.addVertex(VertexKind::kGpu, node);
    const int g1 = t.addVertex(VertexKind::kGpu, node);
    const int nvs = t.addVertex(VertexKind::kNvSwitch, node, "nvswitch" + std::to_string(q));
    const int pcie = t.addVertex(VertexKind::kPcieSwitch, node, "pcie" + std::to_string(q));
    const int nic = t.addVertex(VertexKind::kNic, node, "nic" + std::to_string(q));
    for (int g : {g0, g1}) {
      t.addDuplexLink(g, nvs, LinkKind::kNvlink, 100, 0.5);
      t.addDuplexLink(g, pcie, LinkKind::kPcie, 20, 1);
    }
    t.addDuplexLink(nic, pcie, LinkKind::kPcie, 20, 1);
    t.addDuplexLink(nic, net, LinkKind::kNet, 10, 1);
  }
  return t;
}

TEST(RouteBound, AllGpuRoutesAreTopologyRoutes) {
  // The bound reads every pair's route from allGpuRoutes; it must be Topology::route's, link for link.
  for (const Topology& t : {shipped("dgx1-v100"), shipped("dgx-h100-x2"), shipped("ndv2-x2"), twoNodes()}) {
    const int n = t.numGpus();
    const std::vector<std::optional<Route>> all = allGpuRoutes(t);
    ASSERT_EQ(all.size(), static_cast<size_t>(n) * n);
    for (int a = 0; a < n; ++a) {
      EXPECT_FALSE(all[static_cast<size_t>(a) * n + a].has_value());
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        const std::optional<Route> one = t.route(a, b);
        const std::optional<Route>& batch = all[static_cast<size_t>(a) * n + b];
        ASSERT_EQ(one.has_value(), batch.has_value()) << t.name << " " << a << " -> " << b;
        if (one) EXPECT_EQ(one->links, batch->links) << t.name << " " << a << " -> " << b;
      }
    }
  }
}

TEST(RouteBound, DgxA100OnlyTheNvSwitchLinkCounts) {
  // dgx-a100-x1: every GPU pair's route is GPU -> NVSwitch -> GPU (12 x 20 = 240 GB/s) — the PCIe path between two
  // GPUs is at most 24 GB/s, so it is never the widest. The only link into GPU b that any route uses is
  // NVSwitch -> b (240 GB/s, 240e3 bytes/us), and it carries exactly the pairs (a, b). All-gather: b must receive
  // 7 shares of m: 7m <= 240e3 T, so T >= 7m / 240e3; f_ab = m for every pair meets it with equality (each
  // NVSwitch -> GPU and GPU -> NVSwitch link carries 7m). The cut bound instead counts the 24 GB/s PCIe link too:
  // 7m / 264e3. Reduce-scatter: the mirror image out of each GPU's GPU -> NVSwitch link: 7m / 240e3. All-reduce:
  // their sum. All-to-all (S = send buffer): each GPU receives 7/8 S over the same link: 7/8 S / 240e3.
  const Topology t = shipped("dgx-a100-x1");
  expectRel(route(t, CollectiveKind::kAllGather, kM), 7 * kM / 240e3, "allgather");
  expectRel(route(t, CollectiveKind::kReduceScatter, kM), 7 * kM / 240e3, "reducescatter");
  expectRel(route(t, CollectiveKind::kAllReduce, kM), 2 * 7 * kM / 240e3, "allreduce");
  const double s = 8 * kM;
  expectRel(route(t, CollectiveKind::kAllToAll, s), 7.0 / 8 * s / 240e3, "alltoall");

  // collectiveBound: size = 8m (nccl-tests' all-gather output); the route bound binds over the cut bound.
  Result<CollectiveBound> b = collectiveBound(t, CollectiveKind::kAllGather, static_cast<uint64_t>(8 * kM));
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  expectRel(b->route_us, 7 * kM / 240e3, "route_us");
  expectRel(b->cut_us, 7 * kM / 264e3, "cut_us");
  EXPECT_EQ(b->bandwidth_us, std::max(b->cut_us, b->route_us));
  EXPECT_EQ(b->bandwidth_us, b->route_us);
  EXPECT_EQ(b->time_us, std::max(b->bandwidth_us, b->latency_us));
  EXPECT_FALSE(b->cut.empty());  // still the cut bound's binding cut
}

TEST(RouteBound, Dgx1V100QpiIsShared) {
  // dgx1-v100: every GPU has NVLinks to 4 GPUs (2 x NV2 + 2 x NV1 = 6 lanes x 20 = 120 GB/s in, 120 out), and those
  // pairs talk over the direct NVLink (>= 20 GB/s beats the 12 GB/s PCIe path). The 3 other GPUs sit on the other
  // socket; those 12 pairs per direction route GPU -> PCIe -> CPU -> QPI (6 GB/s) -> CPU -> PCIe -> GPU.
  // Lower bound: the 4 GPUs of socket 1 receive over their NVLinks (each NVLink carries only its own pair: 4 x 120)
  // plus whatever crosses the QPI cpu0 -> cpu1 (6): 4 x 7m <= (480 + 6) e3 T, so T >= 28m / 486e3 = 7m / 121.5e3
  // (= 8 x 7/8 S / 972e3 with S = 8m: 972 = 8 x 120 + 2 x 6 GB/s of usable ingress). Achieved: f = 20e3 T per
  // NVLink lane, and every cross-socket pair gets 6e3 T / 12 = 0.5e3 T, so each GPU receives 120e3 T + 3 x 0.5e3 T
  // = 121.5e3 T = 7m (each GPU gets 1.5 GB/s of the QPI: 4 GPUs per side share 6 GB/s); the PCIe links carry at most
  // 2 x 1.5 = 3 GB/s of their 12. The cut bound lets each GPU also use its 12 GB/s PCIe link: 7m / 132e3.
  const Topology t = shipped("dgx1-v100");
  expectRel(route(t, CollectiveKind::kAllGather, kM), 7 * kM / 121.5e3, "allgather");
  // Reduce-scatter: the same argument on the outgoing links.
  expectRel(route(t, CollectiveKind::kReduceScatter, kM), 7 * kM / 121.5e3, "reducescatter");
  // All-to-all with S = 8m: each GPU receives and sends 7/8 S = 7m; the flow above (symmetric) meets both.
  const double s = 8 * kM;
  expectRel(route(t, CollectiveKind::kAllToAll, s), 7.0 / 8 * s / 121.5e3, "alltoall");

  Result<CutBound> cut = allGatherCutBound(t, kM);
  ASSERT_TRUE(cut.isOk());
  EXPECT_LT(cut->time_us, 7 * kM / 121.5e3);  // the route bound is the tighter one here

  // All-to-all: the socket bisection of the cut bound (2S across 120 GB/s of NVLink + 6 of QPI) binds instead, so
  // the bandwidth bound is the cut bound: the maximum of the two either way.
  Result<CollectiveBound> a2a = collectiveBound(t, CollectiveKind::kAllToAll, static_cast<uint64_t>(s));
  ASSERT_TRUE(a2a.isOk()) << a2a.status().toString();
  Result<CutBound> a2a_cut = allToAllCutBound(t, s);
  ASSERT_TRUE(a2a_cut.isOk());
  expectRel(a2a->cut_us, a2a_cut->time_us, "a2a cut_us");
  expectRel(a2a->route_us, 7.0 / 8 * s / 121.5e3, "a2a route_us");
  EXPECT_GT(a2a->cut_us, a2a->route_us);
  EXPECT_EQ(a2a->bandwidth_us, std::max(a2a->cut_us, a2a->route_us));
  EXPECT_EQ(a2a->bandwidth_us, a2a->cut_us);
}

TEST(RouteBound, LineHasMissingPairs) {
  // gpu0 - gpu1 - gpu2, 10 GB/s each way. Routes never relay through a GPU, so (0, 2) and (2, 0) have no route
  // and no variable. All-gather: GPU 2 can only receive from GPU 1, over link 1 -> 2, which carries f_12 alone:
  // f_12 >= 2m (D_in) <= 10e3 T, T >= 2m / 10e3; achieved with f_12 = f_10 = 2m, f_01 = f_21 = m.
  // Reduce-scatter: GPU 0 sends its 2 foreign shares over 0 -> 1 only: 2m / 10e3. All-reduce: 4m / 10e3.
  // All-to-all: GPU 2 receives 2/3 S over 1 -> 2: (2/3) S / 10e3.
  const Topology t = testing::lineTopology(3, 10, 1);
  ASSERT_FALSE(t.route(0, 2).has_value());
  expectRel(route(t, CollectiveKind::kAllGather, kM), 2 * kM / 10e3, "allgather");
  expectRel(route(t, CollectiveKind::kReduceScatter, kM), 2 * kM / 10e3, "reducescatter");
  expectRel(route(t, CollectiveKind::kAllReduce, kM), 4 * kM / 10e3, "allreduce");
  const double s = 3 * kM;
  expectRel(route(t, CollectiveKind::kAllToAll, s), 2.0 / 3 * s / 10e3, "alltoall");
}

TEST(RouteBound, NodeRowsBind) {
  // n = 4, k = 2 GPUs per node. All-gather: the 2 outside shares must enter node 1, every byte first in a message
  // from a node-0 GPU to a node-1 GPU, whose route crosses net -> nic1 (10 GB/s): 2m <= 10e3 T, T >= 2m / 10e3.
  // Achieved: each of the 4 cross pairs into node 1 carries m/2 (net -> nic1 carries 2m), each GPU then gets m
  // from outside and 2m from its node peer over the NVSwitch (room for 100e3 x 2m/10e3 = 20m). Without the node
  // rows the per-GPU rows alone would allow 3m / (100 + 20) e3 (a GPU served by its peer), so this pins them.
  // Reduce-scatter: the mirror image (node 0's contributions to the 2 outside shares leave over nic0 -> net).
  // All-to-all: k (n-k) / n S = S crosses into each node: S / 10e3.
  const Topology t = twoNodes();
  ASSERT_TRUE(validateTopology(t).isOk()) << validateTopology(t).toString();
  std::optional<Route> across = t.route(0, 2);
  ASSERT_TRUE(across.has_value());
  EXPECT_EQ(across->bandwidth_gbps, 10);
  expectRel(route(t, CollectiveKind::kAllGather, kM), 2 * kM / 10e3, "allgather");
  expectRel(route(t, CollectiveKind::kReduceScatter, kM), 2 * kM / 10e3, "reducescatter");
  expectRel(route(t, CollectiveKind::kAllReduce, kM), 4 * kM / 10e3, "allreduce");
  const double s = 4 * kM;
  expectRel(route(t, CollectiveKind::kAllToAll, s), s / 10e3, "alltoall");
}

TEST(RouteBound, Errors) {
  const Topology t = shipped("dgx-a100-x1");
  EXPECT_EQ(routeBound(t, CollectiveKind::kAllGather, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(routeBound(t, CollectiveKind::kAllGather, std::nan("")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(routeBound(t, CollectiveKind::kBroadcast, kM).status().code(), StatusCode::kUnsupported);
  // One GPU: nothing to move.
  Result<double> one = routeBound(testing::starTopology(1, 10, 1), CollectiveKind::kAllGather, kM);
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(*one, 0);
  // Zero bytes: zero time.
  Result<double> zero = routeBound(t, CollectiveKind::kAllReduce, 0);
  ASSERT_TRUE(zero.isOk());
  EXPECT_EQ(*zero, 0);

  // Two GPUs of one node joined only through the network: a route between GPUs of one node never leaves it, so
  // there is no route at all (the cut bound, which ignores routes, still finds the graph connected).
  Topology apart;
  const int node = apart.addNode("n0");
  const int g0 = apart.addVertex(VertexKind::kGpu, node);
  const int g1 = apart.addVertex(VertexKind::kGpu, node);
  const int n0 = apart.addVertex(VertexKind::kNic, node, "nic0");
  const int n1 = apart.addVertex(VertexKind::kNic, node, "nic1");
  const int net = apart.addVertex(VertexKind::kNetSwitch, -1, "net");
  apart.addDuplexLink(g0, n0, LinkKind::kPcie, 10, 1);
  apart.addDuplexLink(g1, n1, LinkKind::kPcie, 10, 1);
  apart.addDuplexLink(n0, net, LinkKind::kNet, 10, 1);
  apart.addDuplexLink(n1, net, LinkKind::kNet, 10, 1);
  ASSERT_TRUE(allGatherCutBound(apart, kM).isOk());
  Result<double> r = routeBound(apart, CollectiveKind::kAllGather, kM);
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("gpu1"), std::string::npos) << r.status().message();
  EXPECT_EQ(collectiveBound(apart, CollectiveKind::kAllGather, 1 << 20).status().code(), StatusCode::kInvalidArgument);
}

TEST(RouteBound, AboveTheLimitOnlyTheCutBound) {
  // 257 GPUs on one switch: routeBound declines; collectiveBound reports route_us = 0 and the cut bound alone:
  // each GPU receives 256 shares of m = size / 257 over its 10 GB/s downlink.
  const int n = kRouteBoundMaxGpus + 1;
  const Topology t = testing::starTopology(n, 10, 1);
  EXPECT_EQ(routeBound(t, CollectiveKind::kAllGather, kM).status().code(), StatusCode::kUnsupported);
  const uint64_t size = static_cast<uint64_t>(n) * 1000;
  Result<CollectiveBound> b = collectiveBound(t, CollectiveKind::kAllGather, size);
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  EXPECT_EQ(b->route_us, 0);
  expectRel(b->cut_us, (n - 1) * 1000.0 / 10e3, "cut_us");
  EXPECT_EQ(b->bandwidth_us, b->cut_us);
}

TEST(RouteBound, SweepScalesBothBounds) {
  // collectiveBounds solves each bound once and scales: at every size the result equals collectiveBound's, and
  // on dgx-a100-x1 all-gather route_us = 7/8 size / 240e3, cut_us = 7/8 size / 264e3.
  const Topology t = shipped("dgx-a100-x1");
  const std::vector<uint64_t> sizes = {1 << 10, 1 << 20, 1 << 30};
  Result<std::vector<CollectiveBound>> sweep = collectiveBounds(t, CollectiveKind::kAllGather, sizes);
  ASSERT_TRUE(sweep.isOk()) << sweep.status().toString();
  ASSERT_EQ(sweep->size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double size = static_cast<double>(sizes[i]);
    const CollectiveBound& b = sweep->at(i);
    expectRel(b.route_us, 7.0 / 8 * size / 240e3, "route_us");
    expectRel(b.cut_us, 7.0 / 8 * size / 264e3, "cut_us");
    EXPECT_EQ(b.bandwidth_us, std::max(b.cut_us, b.route_us));
    EXPECT_EQ(b.time_us, std::max(b.bandwidth_us, b.latency_us));
    Result<CollectiveBound> one = collectiveBound(t, CollectiveKind::kAllGather, sizes[i]);
    ASSERT_TRUE(one.isOk());
    expectRel(b.route_us, one->route_us, "sweep vs one");
  }
  // 1 KiB is latency-bound (0.7 us: GPU -> NVSwitch -> GPU at 0.35 us a hop), 1 GiB bandwidth-bound.
  EXPECT_EQ(sweep->front().time_us, sweep->front().latency_us);
  EXPECT_EQ(sweep->back().time_us, sweep->back().route_us);
}

// dgx-h100-x4.yaml with `count: 4` nodes replaced by `nodes` (the rail network grows with them).
Topology dgxH100Nodes(int nodes) {
  std::ifstream in(std::string(BRAID_SOURCE_DIR) + "/topologies/dgx-h100-x4.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const std::string from = "nodes: {template: dgx-h100, count: 4}";
  const size_t at = yaml.find(from);
  EXPECT_NE(at, std::string::npos);
  if (at == std::string::npos) return Topology{};
  yaml.replace(at, from.size(), "nodes: {template: dgx-h100, count: " + std::to_string(nodes) + "}");
  Result<Topology> t = readTopologyYaml(yaml, "dgx-h100-x" + std::to_string(nodes));
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? *t : Topology{};
}

TEST(RouteBound, DgxH100FourNodes) {
  // 32 GPUs. Each GPU takes data in over its NVSwitch link (18 x 20.6 = 370.8 GB/s; pairs inside the node) and its
  // PCIe link from its PCIe switch (48 GB/s; pairs from other nodes enter through the GPU's own NIC and PCIe
  // switch), so the all-gather's 31 shares need T >= 31m / 418.8e3. Node rows: 24 outside shares enter through 8
  // NIC -> PCIe links of 48: 24m / 384e3, less. Achieved: each GPU receives 48e3 T (3.55m) from the 3 GPUs of the
  // same local index (same rail) in the other nodes, a third each, over GPU -> PCIe -> NIC -> rail switch -> NIC ->
  // PCIe -> GPU (48e3 T on each of those links, 48 and 50 GB/s), and 370.8e3 T from its 7 node peers over the
  // NVSwitch: 418.8e3 T = 31m in all.
  const Topology t = dgxH100Nodes(4);
  ASSERT_EQ(t.numGpus(), 32);
  expectRel(route(t, CollectiveKind::kAllGather, kM), 31 * kM / 418.8e3, "allgather");
}

TEST(RouteBound, DgxH100SixteenNodes) {
  // 128 GPUs, 16256 pair variables. Node rows: the 120 outside shares of m enter each node through its 8
  // NIC -> PCIe links (48 GB/s each; the NIC's own network link is 50): T >= 120m / 384e3. The per-GPU rows ask
  // less: 127m / 418.8e3. Achieved: every GPU sends 1m to the GPU of the same local index (same rail) in each of
  // the 15 other nodes, over GPU -> PCIe -> NIC -> rail switch -> NIC -> PCIe -> GPU: 15m per link = 48e3 T, and
  // 16m to each of its 7 node peers (112m <= 370.8e3 T = 115.9m); each GPU receives 15m + 112m = 127m.
  const Topology t = dgxH100Nodes(16);
  ASSERT_EQ(t.numGpus(), 128);
  const double us = route(t, CollectiveKind::kAllGather, kM);
  expectRel(us, 120 * kM / 384e3, "allgather");
}

}  // namespace
}  // namespace braid
