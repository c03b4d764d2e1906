// All-to-all cut bound (allToAllCutBound): closed forms on a switch and on two nodes joined by one NIC link, and
// brute force over every vertex subset of random small graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "braid/bounds.h"
#include "braid/topology.h"

namespace braid {
namespace {

// n GPUs on one switch, every GPU linked both ways at `bw` GB/s.
Topology singleSwitch(int n, double bw) {
  Topology t;
  t.name = "switch";
  const int node = t.addNode("node0");
  const int sw = t.addVertex(VertexKind::kNvSwitch, node, "sw");
  for (int i = 0; i < n; ++i) t.addDuplexLink(t.addVertex(VertexKind::kGpu, node), sw, LinkKind::kNvlink, bw, 0.5);
  return t;
}

// Two nodes of g GPUs on a fast switch each; the switches' NICs joined by one link each way of `nic_bw` GB/s.
Topology twoNodes(int g, double gpu_bw, double nic_bw) {
  Topology t;
  t.name = "two-nodes";
  int nic[2];
  for (int q = 0; q < 2; ++q) {
    const int node = t.addNode("node" + std::to_string(q));
    const int sw = t.addVertex(VertexKind::kNvSwitch, node, "node" + std::to_string(q) + ".sw");
    for (int i = 0; i < g; ++i) {
      t.addDuplexLink(t.addVertex(VertexKind::kGpu, node), sw, LinkKind::kNvlink, gpu_bw, 0.5);
    }
    nic[q] = t.addVertex(VertexKind::kNic, node, "node" + std::to_string(q) + ".nic");
    t.addDuplexLink(nic[q], sw, LinkKind::kPcie, 1000, 1.0);
  }
  t.addDuplexLink(nic[0], nic[1], LinkKind::kNet, nic_bw, 1.3);
  return t;
}

// Brute force: max over every vertex subset S of a(n-a)/n x m / min(B_out(S), B_in(S)), in microseconds.
double bruteForce(const Topology& t, double m) {
  const int nv = static_cast<int>(t.vertices.size());
  const double n = t.numGpus();
  double best = 0;
  for (uint32_t mask = 1; mask + 1 < (1u << nv); ++mask) {
    double a = 0, out = 0, in = 0;
    for (const Vertex& v : t.vertices) a += (v.kind == VertexKind::kGpu && ((mask >> v.id) & 1u)) ? 1 : 0;
    if (a == 0 || a == n) continue;
    for (const Link& l : t.links) {
      const bool s_in = (mask >> l.src) & 1u, d_in = (mask >> l.dst) & 1u;
      if (s_in && !d_in) out += l.bandwidth_gbps;
      if (!s_in && d_in) in += l.bandwidth_gbps;
    }
    best = std::max(best, a * (n - a) / n * m / (std::min(out, in) * 1e3));
  }
  return best;
}

// The ratio of one given cut, recomputed here from its definition.
double cutValue(const Topology& t, const std::vector<int>& cut, double m) {
  std::vector<bool> in_s(t.vertices.size(), false);
  for (int v : cut) in_s[v] = true;
  const double n = t.numGpus();
  double a = 0, out = 0, in = 0;
  for (const Vertex& v : t.vertices) a += (v.kind == VertexKind::kGpu && in_s[v.id]) ? 1 : 0;
  for (const Link& l : t.links) {
    if (in_s[l.src] && !in_s[l.dst]) out += l.bandwidth_gbps;
    if (!in_s[l.src] && in_s[l.dst]) in += l.bandwidth_gbps;
  }
  return a * (n - a) / n * m / (std::min(out, in) * 1e3);
}

TEST(AllToAllBound, SingleSwitchIsInjectionBound) {
  // Each GPU sends (n-1)/n of its buffer S through its own uplink of B: T = (n-1) S / (n B).
  // n = 8, B = 50 GB/s = 5e4 bytes/us, S = 1e6 bytes: 7 x 1e6 / (8 x 5e4) = 17.5 us.
  const Topology t = singleSwitch(8, 50);
  Result<CutBound> b = allToAllCutBound(t, 1e6);
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  EXPECT_NEAR(b->time_us, 17.5, 1e-9);
  EXPECT_NEAR(bruteForce(t, 1e6), 17.5, 1e-9);
  ASSERT_EQ(b->cut.size(), 1u);  // one GPU alone binds
  EXPECT_EQ(t.vertices[b->cut[0]].kind, VertexKind::kGpu);
}

TEST(AllToAllBound, TwoNodesAreBoundByTheNicLink) {
  // n = 8 GPUs, 4 per node; the node cut carries (n/2)^2 x S/n = 16 x S / 8 = 2 S bytes each way over one
  // 10 GB/s link: T = 2 S / 1e4 us. With S = 1e6: 200 us. (A GPU alone: 7/8 x 1e6 / 4e5 = 2.19 us.)
  const Topology t = twoNodes(4, 400, 10);
  Result<CutBound> b = allToAllCutBound(t, 1e6);
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  EXPECT_NEAR(b->time_us, 200.0, 1e-9);
  EXPECT_NEAR(bruteForce(t, 1e6), 200.0, 1e-9);
  // The binding set is one whole node (its 4 GPUs, switch and NIC).
  ASSERT_EQ(b->cut.size(), 6u);
  const int node = t.vertices[b->cut[0]].node;
  for (int v : b->cut) EXPECT_EQ(t.vertices[v].node, node);
}

TEST(AllToAllBound, EdgeCasesAndErrors) {
  EXPECT_EQ(allToAllCutBound(singleSwitch(1, 10), 1e6)->time_us, 0);
  EXPECT_FALSE(allToAllCutBound(singleSwitch(4, 10), -1).isOk());
  EXPECT_FALSE(allToAllCutBound(singleSwitch(4, 10), std::numeric_limits<double>::infinity()).isOk());
  Topology cut_off = singleSwitch(3, 10);
  cut_off.addVertex(VertexKind::kGpu, 0);  // gpu3, linked to nothing
  Result<CutBound> b = allToAllCutBound(cut_off, 1e6);
  ASSERT_FALSE(b.isOk());
  EXPECT_NE(b.status().message().find("gpu3"), std::string::npos) << b.status().message();
}

// Random connected graphs of <= 12 vertices with switches. Half of them ("clustered") are two nodes whose inside
// links are all >= 1000 GB/s and whose only connection is one link pair of <= 2 GB/s: any set that splits a node
// cuts an inside link, so its ratio is at most (n^2/4)/n / 1000 = n / 4000 <= 0.003 per byte/1e3, while the node
// cut has a(n-a)/n / 2 >= 0.25 of the same units — the node cut binds and the bound must equal brute force.
TEST(AllToAllBound, BruteForceOverRandomGraphs) {
  std::mt19937 rng(20260401);
  int clustered_checked = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const bool clustered = trial % 2 == 1;
    Topology t;
    t.name = "random" + std::to_string(trial);
    std::uniform_int_distribution<int> gpus_d(2, 6), switches_d(1, 4);
    const int gpus = gpus_d(rng);
    const int switches = std::min(switches_d(rng), 12 - gpus);
    const int n0 = t.addNode("node0");
    const int n1 = t.addNode("node1");
    std::vector<int> ids;
    std::vector<int> side;
    for (int i = 0; i < gpus; ++i) {
      const int q = clustered ? (i < (gpus + 1) / 2 ? 0 : 1) : static_cast<int>(rng() % 2);
      ids.push_back(t.addVertex(VertexKind::kGpu, q == 0 ? n0 : n1));
      side.push_back(q);
    }
    for (int i = 0; i < switches; ++i) {
      const int q = clustered ? i % 2 : static_cast<int>(rng() % 2);
      ids.push_back(t.addVertex(VertexKind::kPcieSwitch, q == 0 ? n0 : n1, "sw" + std::to_string(i)));
      side.push_back(q);
    }
    std::uniform_real_distribution<double> fast(1000, 5000), any(1, 100), slow(0.5, 2);
    const int nv = static_cast<int>(ids.size());
    if (clustered) {
      // A spanning chain inside each node, extra random inside links, one slow link pair between the nodes.
      for (int q = 0; q < 2; ++q) {
        int prev = -1;
        for (int v = 0; v < nv; ++v) {
          if (side[v] != q) continue;
          if (prev >= 0) t.addDuplexLink(ids[prev], ids[v], LinkKind::kPcie, fast(rng), 1);
          prev = v;
        }
      }
      for (int e = 0; e < nv; ++e) {
        const int a = static_cast<int>(rng() % nv), b = static_cast<int>(rng() % nv);
        if (a != b && side[a] == side[b]) t.addLink(ids[a], ids[b], LinkKind::kPcie, fast(rng), 1);
      }
      int a = -1, b = -1;
      for (int v = 0; v < nv; ++v) {
        if (side[v] == 0 && a < 0) a = v;
        if (side[v] == 1 && b < 0) b = v;
      }
      t.addLink(ids[a], ids[b], LinkKind::kNet, slow(rng), 1);
      t.addLink(ids[b], ids[a], LinkKind::kNet, slow(rng), 1);
    } else {
      for (int v = 1; v < nv; ++v) t.addDuplexLink(ids[v - 1], ids[v], LinkKind::kPcie, any(rng), 1);
      const int extra = static_cast<int>(rng() % (2 * nv));
      for (int e = 0; e < extra; ++e) {
        const int a = static_cast<int>(rng() % nv), b = static_cast<int>(rng() % nv);
        if (a != b) t.addLink(ids[a], ids[b], LinkKind::kPcie, any(rng), 1);
      }
    }
    SCOPED_TRACE(t.name);
    const double m = 1e6;
    Result<CutBound> b = allToAllCutBound(t, m);
    ASSERT_TRUE(b.isOk()) << b.status().toString();
    const double brute = bruteForce(t, m);
    EXPECT_GT(b->time_us, 0);
    EXPECT_GE(brute, b->time_us * (1 - 1e-12));  // a lower bound from examined cuts never exceeds the max
    EXPECT_NEAR(cutValue(t, b->cut, m), b->time_us, 1e-9 * b->time_us);  // the reported cut gives the value
    if (clustered && t.numGpus() >= 2) {
      EXPECT_NEAR(b->time_us, brute, 1e-9 * brute);
      ++clustered_checked;
    }
  }
  EXPECT_GE(clustered_checked, 10);
}

}  // namespace
}  // namespace braid
